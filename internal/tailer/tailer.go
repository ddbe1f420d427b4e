package tailer

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Defaults applied when an Options field is zero or negative.
const (
	DefaultMaxBytes = 256 << 10
	DefaultMaxLine  = 1 << 20
)

// headMax bounds the fingerprint of the file's first bytes. The first line of
// events.jsonl carries a timestamp, so a recreated log differs within it even
// when the filesystem hands the new file the old inode number (ext4 does).
const headMax = 256

// skipScanLimit bounds how far one call scans for the end of an overlong
// line. Discarded bytes cost no memory, so this is much larger than a batch,
// but still finite so one call cannot be pinned by a runaway writer.
const skipScanLimit = 32 << 20

const skipChunk = 64 << 10

// Cursor is the position in the log that the workflow carries between calls.
// It is plain data and survives a JSON round trip unchanged. The zero Cursor
// means "from the beginning of whatever file is there".
type Cursor struct {
	// Gen counts restarts from offset 0 after the file was truncated or
	// replaced; (Gen, Line.Offset) identifies a line uniquely.
	Gen int `json:"gen"`
	// Offset is the byte offset of the first byte not yet consumed.
	Offset int64 `json:"offset"`
	// Ino identifies the file the offset belongs to; 0 = not yet known.
	Ino uint64 `json:"ino,omitempty"`
	// HeadLen and HeadSum fingerprint the first HeadLen consumed bytes
	// (CRC-32), catching a replacement that reuses the inode number.
	HeadLen int    `json:"headLen,omitempty"`
	HeadSum uint32 `json:"headSum,omitempty"`
	// Skipping is set while the reader is discarding an unterminated line
	// that is already longer than the line limit; SkipFrom is where that
	// line starts, so it can be reported once its end is found.
	Skipping bool  `json:"skipping,omitempty"`
	SkipFrom int64 `json:"skipFrom,omitempty"`
}

func (c Cursor) validate() error {
	switch {
	case c.Gen < 0:
		return fmt.Errorf("negative generation %d", c.Gen)
	case c.Offset < 0:
		return fmt.Errorf("negative offset %d", c.Offset)
	case c.HeadLen < 0 || c.HeadLen > headMax || int64(c.HeadLen) > c.Offset:
		return fmt.Errorf("head length %d out of range for offset %d", c.HeadLen, c.Offset)
	case c.Skipping && (c.SkipFrom < 0 || c.SkipFrom > c.Offset):
		return fmt.Errorf("skip start %d out of range for offset %d", c.SkipFrom, c.Offset)
	}
	return nil
}

// Line is one complete line of the log, without its '\n'.
type Line struct {
	Gen    int   `json:"gen"`
	Offset int64 `json:"offset"` // byte offset of the line's first byte
	Length int64 `json:"length"` // bytes in the line, excluding '\n'
	// Data is the line's content; nil when TooLong. Lines of one batch may
	// share a backing array, but each Data is capped so appending to it
	// cannot overwrite its neighbour.
	Data []byte `json:"data"`
	// TooLong reports a line longer than Options.MaxLine that was skipped
	// without being read into memory; the caller should count it as
	// malformed. Its Offset and Length still say exactly what was skipped.
	TooLong bool `json:"tooLong,omitempty"`
}

// Batch is the result of one read.
type Batch struct {
	Lines []Line `json:"lines"`
	// Next is where the following read starts. It only moves past bytes
	// that were delivered (or skipped as TooLong); a partial last line stays
	// ahead of it.
	Next Cursor `json:"next"`
	// Truncated: the file shrank below the cursor or was replaced, and
	// reading restarted at offset 0 with Gen+1. Lines already hold the new
	// file's content.
	Truncated bool `json:"truncated,omitempty"`
	// Missing: the file does not exist (yet, or any more); Next equals the
	// cursor passed in.
	Missing bool `json:"missing,omitempty"`
	// More: the read stopped because of the byte budget (or the skip scan
	// limit), not because it ran out of complete lines; call again at once.
	More bool `json:"more,omitempty"`
	// Stopped: set by Wait when WaitOptions.Stop reported true; the batch
	// then holds everything written before that (up to the byte budget).
	Stopped bool `json:"stopped,omitempty"`
}

// Options bound one read. Zero fields take the defaults.
type Options struct {
	// MaxBytes bounds the sum of len(Data)+1 over a batch's lines, except
	// that a batch's first line is always delivered whole (up to MaxLine),
	// so a line longer than MaxBytes cannot stall the tail.
	MaxBytes int
	// MaxLine is the longest line delivered; longer ones come back as
	// TooLong.
	MaxLine int
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxLine <= 0 {
		o.MaxLine = DefaultMaxLine
	}
	return o
}

// ReadFrom reads the complete lines after c from the file at path, at most
// about maxBytes of them (0 = DefaultMaxBytes), with the default line limit.
func ReadFrom(path string, c Cursor, maxBytes int) (Batch, error) {
	return Read(path, c, Options{MaxBytes: maxBytes})
}

// Read is ReadFrom with every limit explicit.
//
// It never returns an error for the conditions a tail expects: a missing file
// gives Missing, a truncated or replaced one restarts at offset 0 with
// Truncated. Errors mean the path cannot be read at all (permissions, not a
// regular file, an I/O error) or the cursor is malformed; the returned
// batch's Next is then the cursor passed in.
func Read(path string, c Cursor, opts Options) (Batch, error) {
	opts = opts.withDefaults()
	return read(path, c, opts, opts.MaxBytes, true)
}

// read is Read with the budget split out: Wait tops up a lingering batch with
// the remaining room and must not let an oversize first line overshoot it.
func read(path string, c Cursor, opts Options, room int, allowOversize bool) (Batch, error) {
	if err := c.validate(); err != nil {
		return Batch{Next: c}, fmt.Errorf("tailer: invalid cursor for %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Batch{Next: c, Missing: true}, nil
		}
		return Batch{Next: c}, fmt.Errorf("tailer: open %s: %w", path, err)
	}
	defer f.Close()

	// Identity and size come from the open descriptor, so a replacement
	// racing this call cannot mix two files into one batch.
	fi, err := f.Stat()
	if err != nil {
		return Batch{Next: c}, fmt.Errorf("tailer: stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return Batch{Next: c}, fmt.Errorf("tailer: %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Batch{Next: c}, fmt.Errorf("tailer: stat %s: no inode information on this platform", path)
	}

	r := reader{f: f, size: fi.Size(), cur: c, room: room, allowOversize: allowOversize, maxLine: opts.MaxLine}
	restart, err := r.replaced(st.Ino)
	if err != nil {
		return Batch{Next: c}, fmt.Errorf("tailer: check identity of %s: %w", path, err)
	}
	if restart {
		r.cur = Cursor{Gen: c.Gen + 1}
	}
	r.cur.Ino = st.Ino

	if err := r.run(); err != nil {
		return Batch{Next: c}, fmt.Errorf("tailer: read %s at offset %d: %w", path, r.cur.Offset, err)
	}
	if err := r.updateHead(); err != nil {
		return Batch{Next: c}, fmt.Errorf("tailer: fingerprint %s: %w", path, err)
	}
	return Batch{Lines: r.lines, Next: r.cur, Truncated: restart, More: r.more}, nil
}

type reader struct {
	f             *os.File
	size          int64
	cur           Cursor
	lines         []Line
	used          int // budget consumed by delivered data lines
	room          int
	allowOversize bool
	maxLine       int
	more          bool
	scratch       []byte
}

// replaced reports whether the cursor belongs to a different file, or to an
// earlier incarnation of this one (shrunk below the cursor, or different first
// bytes).
func (r *reader) replaced(ino uint64) (bool, error) {
	c := r.cur
	if c.Ino != 0 && c.Ino != ino {
		return true, nil
	}
	if r.size < c.Offset {
		return true, nil
	}
	if c.HeadLen > 0 {
		sum, err := r.headSum(c.HeadLen)
		if err != nil {
			return false, err
		}
		return sum != c.HeadSum, nil
	}
	return false, nil
}

func (r *reader) headSum(n int) (uint32, error) {
	buf := make([]byte, n)
	got, err := r.f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if got < n {
		// Shrunk since fstat: certainly not the bytes we fingerprinted.
		return ^crc32.ChecksumIEEE(buf[:got]), nil
	}
	return crc32.ChecksumIEEE(buf), nil
}

// updateHead widens the fingerprint as consumed bytes accumulate. Only
// consumed bytes are covered: they can no longer change in an append-only log.
func (r *reader) updateHead() error {
	if r.cur.HeadLen >= headMax || r.cur.Offset <= int64(r.cur.HeadLen) {
		return nil
	}
	n := int(min(int64(headMax), r.cur.Offset))
	sum, err := r.headSum(n)
	if err != nil {
		return err
	}
	r.cur.HeadLen, r.cur.HeadSum = n, sum
	return nil
}

// run consumes lines until the file's end, a partial line, or the budget.
// Every iteration either advances the cursor or stops.
func (r *reader) run() error {
	for {
		if r.cur.Skipping {
			found, err := r.skip()
			if err != nil {
				return err
			}
			if !found {
				return nil
			}
			continue
		}
		if r.cur.Offset >= r.size {
			return nil
		}

		window := r.room - r.used
		if r.used == 0 && r.allowOversize && window < r.maxLine+1 {
			// Enough to see the end of any deliverable line.
			window = r.maxLine + 1
		}
		if window <= 0 {
			r.more = true
			return nil
		}
		if avail := r.size - r.cur.Offset; int64(window) > avail {
			window = int(avail)
		}
		buf := make([]byte, window)
		n, err := r.f.ReadAt(buf, r.cur.Offset)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if n < window {
			// Truncated under us; the next call sees it via the size.
			r.size = r.cur.Offset + int64(n)
		}
		buf = buf[:n]
		atEOF := r.cur.Offset+int64(n) >= r.size

		pos := 0
		full := false
		for {
			i := bytes.IndexByte(buf[pos:], '\n')
			if i < 0 {
				break
			}
			start := r.cur.Offset + int64(pos)
			if i > r.maxLine {
				r.lines = append(r.lines, Line{Gen: r.cur.Gen, Offset: start, Length: int64(i), TooLong: true})
			} else {
				cost := i + 1
				if r.used+cost > r.room && !(r.used == 0 && r.allowOversize) {
					full = true
					break
				}
				r.lines = append(r.lines, Line{Gen: r.cur.Gen, Offset: start, Length: int64(i), Data: buf[pos : pos+i : pos+i]})
				r.used += cost
			}
			pos += i + 1
		}
		r.cur.Offset += int64(pos)
		if full {
			r.more = true
			return nil
		}

		rest := len(buf) - pos
		switch {
		case rest > r.maxLine:
			// Unterminated and already too long: discard it from here on
			// without holding it, and report it when its end shows up.
			r.cur.Skipping, r.cur.SkipFrom = true, r.cur.Offset
			r.cur.Offset += int64(rest)
		case atEOF:
			return nil // nothing left, or a partial line still being written
		case pos == 0:
			// A deliverable line that does not fit the remaining room.
			r.more = true
			return nil
		}
	}
}

// skip scans for the '\n' ending the overlong line that starts at SkipFrom.
func (r *reader) skip() (bool, error) {
	if r.scratch == nil {
		r.scratch = make([]byte, skipChunk)
	}
	limit := min(r.cur.Offset+skipScanLimit, r.size)
	for r.cur.Offset < limit {
		chunk := r.scratch[:min(int64(len(r.scratch)), limit-r.cur.Offset)]
		n, err := r.f.ReadAt(chunk, r.cur.Offset)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		if i := bytes.IndexByte(chunk[:n], '\n'); i >= 0 {
			end := r.cur.Offset + int64(i)
			r.lines = append(r.lines, Line{Gen: r.cur.Gen, Offset: r.cur.SkipFrom, Length: end - r.cur.SkipFrom, TooLong: true})
			r.cur.Offset = end + 1
			r.cur.Skipping, r.cur.SkipFrom = false, 0
			return true, nil
		}
		r.cur.Offset += int64(n)
		if n < len(chunk) {
			r.size = r.cur.Offset // shrank under us
			break
		}
	}
	if r.cur.Offset < r.size {
		r.more = true
	}
	return false, nil
}
