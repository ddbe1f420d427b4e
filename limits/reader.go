package limits

import (
	"bytes"
	"time"
)

// MaxLine is the longest transcript line a Reader judges. Longer lines (a big
// tool output, say) are skipped whole: every limit sign is a short line.
const MaxLine = 1 << 20

// Reader follows a transcript as it grows. Feed it bytes as they arrive, in
// any chunks; it judges each complete line and remembers the first limit it
// sees. It does no I/O and is not safe for concurrent use.
type Reader struct {
	d        *Detector
	partial  []byte // the unfinished last line
	skipping bool   // the current line passed MaxLine: drop it to its end
	found    bool
	v        Verdict
	lines    int
}

// NewReader returns a Reader that judges lines with d.
func (d *Detector) NewReader() *Reader { return &Reader{d: d} }

// Feed takes the next bytes of the transcript and returns the first limit
// seen so far and whether there is one. now is when these bytes were read.
// Once a limit is seen, later bytes are ignored.
func (r *Reader) Feed(p []byte, now time.Time) (Verdict, bool) {
	for len(p) > 0 && !r.found {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.keep(p)
			break
		}
		if r.skipping {
			r.skipping = false
		} else if len(r.partial) == 0 {
			r.judge(p[:i], now)
		} else if len(r.partial)+i <= MaxLine {
			r.partial = append(r.partial, p[:i]...)
			r.judge(r.partial, now)
		}
		r.partial = r.partial[:0]
		p = p[i+1:]
	}
	if r.found {
		r.partial = nil
	}
	return r.v, r.found
}

// End judges what is left after the last newline as a final line, for a
// transcript that ended without one, and returns the verdict as Feed does.
func (r *Reader) End(now time.Time) (Verdict, bool) {
	if !r.found && !r.skipping && len(r.partial) > 0 {
		r.judge(r.partial, now)
	}
	r.partial, r.skipping = nil, false
	return r.v, r.found
}

// Verdict returns the first limit seen, if any.
func (r *Reader) Verdict() (Verdict, bool) { return r.v, r.found }

// Lines counts the lines judged so far.
func (r *Reader) Lines() int { return r.lines }

func (r *Reader) keep(p []byte) {
	if r.skipping {
		return
	}
	if len(r.partial)+len(p) > MaxLine {
		r.partial, r.skipping = r.partial[:0], true
		return
	}
	r.partial = append(r.partial, p...)
}

func (r *Reader) judge(line []byte, now time.Time) {
	if len(line) > MaxLine {
		return
	}
	r.lines++
	if v := r.d.Line(line, now); v.Limited {
		r.v, r.found = v, true
	}
}
