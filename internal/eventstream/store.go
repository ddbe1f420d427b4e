package eventstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/mapping/redact"
)

// MaxLine bounds one stored event. The conductor's lines are cut to far
// less when they are parsed; a longer event is dropped, not stored, so a
// reader's page always holds whole events.
const MaxLine = 1 << 20

// maxCached bounds the streams whose marks a Store keeps in memory. The
// marks are a cache of what the files hold, so forgetting one costs a
// re-read of that file at its next append, nothing more.
const maxCached = 4096

// Store is a directory of streams. Its methods are safe for concurrent use,
// also by several processes sharing the directory.
type Store struct {
	dir   string
	mu    sync.Mutex
	files map[string]*file
}

// Open makes dir if needed and returns its store.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("eventstream: no directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("eventstream: directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("eventstream: create %s: %w", abs, err)
	}
	return &Store{dir: abs, files: map[string]*file{}}, nil
}

// Dir is the store's absolute directory.
func (s *Store) Dir() string { return s.dir }

var runIDRE = regexp.MustCompile(`^run-[A-Za-z0-9_-]{1,256}$`)

// Path is the file of the stream runID, <dir>/<run_id>.jsonl. A run id
// is run- and id characters, so it can never name a path elsewhere.
func (s *Store) Path(runID string) (string, error) {
	if !runIDRE.MatchString(runID) {
		return "", fmt.Errorf("eventstream: run id %q is not run- followed by letters, digits, '_' or '-'", runID)
	}
	return filepath.Join(s.dir, runID+".jsonl"), nil
}

// Result says what one Append did.
type Result struct {
	// Appended events were written; Skipped ones were already in the
	// file; Dropped ones did not validate (Errors says why, one each).
	Appended, Skipped, Dropped int
	// Warnings are what validation reported of the appended events: a
	// degraded enum, a state change the table does not allow (a ts
	// rewritten to UTC milliseconds is routine and not reported). Each names the event's raw_ref; both are redacted, since
	// they quote the values they complain about.
	Warnings []string
	Errors   []string
}

// Append writes the events that the stream does not hold yet, in order,
// each validated (its run's transitions judged against what the file
// already holds) and redacted. Events without a raw_ref position cannot be
// recognised again and are always written. An error means nothing of this
// call may be counted on: call again with the same events.
func (s *Store) Append(runID string, evs []canonical.Event) (Result, error) {
	if len(evs) == 0 {
		return Result{}, nil
	}
	path, err := s.Path(runID)
	if err != nil {
		return Result{}, err
	}
	f := s.file(path)
	f.mu.Lock()
	defer f.mu.Unlock()
	fd, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return Result{}, fmt.Errorf("eventstream: open %s: %w", path, err)
	}
	// Closing the descriptor releases the lock.
	defer fd.Close()
	if err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX); err != nil {
		return Result{}, fmt.Errorf("eventstream: lock %s: %w", path, err)
	}
	if err := f.catchUp(fd); err != nil {
		f.forget()
		return Result{}, fmt.Errorf("eventstream: read %s: %w", path, err)
	}

	var res Result
	var buf bytes.Buffer
	for _, ev := range evs {
		v, warns, err := canonical.Validate(ev)
		if err != nil {
			res.Dropped++
			res.Errors = append(res.Errors, redact.String(fmt.Sprintf("%s: %v", refOf(ev), err)))
			continue
		}
		r := canonical.Redact(v)
		k, keyed := keyOf(r.RawRef)
		if keyed && !f.fresh(k) {
			res.Skipped++
			continue
		}
		if line, err := json.Marshal(r); err != nil || len(line) >= MaxLine {
			if err == nil {
				err = fmt.Errorf("%d bytes, more than a stored event may have", len(line))
			}
			res.Dropped++
			res.Errors = append(res.Errors, redact.String(fmt.Sprintf("%s: %v", r.RawRef, err)))
			continue
		}
		// The unredacted event is the one whose agent ids the table knows.
		// Follow puts before it the states the table implies (bridges
		// without a raw_ref, so they set no mark: one written before a
		// crash that lost its event leaves the event to be written again).
		for _, f2 := range f.stream.Follow(v) {
			_, tw, _ := f.stream.Validate(f2)
			for _, w := range append(warns, tw...) {
				if w.Kind == canonical.WarnTimestamp {
					// Normalising ts to UTC milliseconds is routine (the
					// conductor writes nanoseconds), not a problem to report.
					continue
				}
				res.Warnings = append(res.Warnings, redact.String(r.RawRef+": "+w.String()))
			}
			warns = nil
			line, _ := json.Marshal(canonical.Redact(f2))
			buf.Write(line)
			buf.WriteByte('\n')
		}
		if keyed {
			f.marks[k.source] = k.at
		}
		res.Appended++
	}
	if buf.Len() == 0 {
		return res, nil
	}
	n, err := fd.Write(buf.Bytes())
	if err != nil {
		// The marks set above may not all be on disk: the next append
		// reads them from the file again (and cuts a partial line).
		f.forget()
		return Result{}, fmt.Errorf("eventstream: append to %s: %w", path, err)
	}
	f.size += int64(n)
	return res, nil
}

// file is what this process knows of one stream file.
type file struct {
	mu     sync.Mutex
	ino    uint64
	size   int64 // complete lines read (or written) so far
	marks  map[string]position
	stream canonical.Stream
}

func (s *Store) file(path string) *file {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[path]; ok {
		return f
	}
	if len(s.files) >= maxCached {
		// Any one will do: a forgotten stream is read again when needed,
		// and the file lock keeps two of its copies from writing at once.
		for p := range s.files {
			delete(s.files, p)
			break
		}
	}
	f := &file{marks: map[string]position{}}
	s.files[path] = f
	return f
}

func (f *file) forget() {
	f.ino, f.size = 0, 0
	f.marks = map[string]position{}
	f.stream = canonical.Stream{}
}

// fresh reports whether k is past its source's mark.
func (f *file) fresh(k key) bool {
	m, ok := f.marks[k.source]
	return !ok || k.at.after(m)
}

// catchUp reads what other writers (another process, an earlier life of
// this one) appended since this process last looked, so the marks and the
// transition table are the file's; a replaced or shrunk file is read from
// the start. A partial last line, left by a writer killed mid-write, is
// cut off: its event has no mark and will be written again whole.
func (f *file) catchUp(fd *os.File) error {
	info, err := fd.Stat()
	if err != nil {
		return err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no inode information on this platform")
	}
	size := info.Size()
	if st.Ino != f.ino || size < f.size {
		f.forget()
		f.ino = st.Ino
	}
	if size == f.size {
		return nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(fd, f.size, size-f.size), 64<<10)
	end := f.size
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // line is a partial last line, or empty
		}
		if err != nil {
			return err
		}
		end += int64(len(line))
		ev, perr := canonical.Parse(line)
		if perr != nil {
			continue // not ours to judge: it stays, unread
		}
		if k, ok := keyOf(ev.RawRef); ok && f.fresh(k) {
			f.marks[k.source] = k.at
		}
		_, _, _ = f.stream.Validate(ev)
	}
	if end < size {
		if err := fd.Truncate(end); err != nil {
			return fmt.Errorf("cut a partial last line at %d: %w", end, err)
		}
	}
	f.size = end
	return nil
}

// position orders the events of one source: a conductor line by its
// file's generation and byte offset, a workflow step by its sequence
// number (gen 0).
type position struct{ gen, at int64 }

func (p position) after(q position) bool {
	return p.gen > q.gen || p.gen == q.gen && p.at > q.at
}

// key is where an event comes from: its raw_ref without the fragment, and
// its position there.
type key struct {
	source string
	at     position
}

// keyOf reads a raw_ref's source and position: "#offset=N" (with "gen=G&"
// once the source file was replaced) or "#seq=N". Anything else is no key.
func keyOf(ref string) (key, bool) {
	i := strings.LastIndexByte(ref, '#')
	if i < 0 {
		return key{}, false
	}
	q, err := url.ParseQuery(ref[i+1:])
	if err != nil {
		return key{}, false
	}
	num := func(name string) (int64, bool) {
		v := q.Get(name)
		if v == "" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil && n >= 0
	}
	k := key{source: ref[:i]}
	if off, ok := num("offset"); ok {
		k.at.at = off
		if g, ok := num("gen"); ok {
			k.at.gen = g
		} else if q.Has("gen") {
			return key{}, false
		}
		return k, true
	}
	if seq, ok := num("seq"); ok {
		k.at.at = seq
		return k, true
	}
	return key{}, false
}

func refOf(ev canonical.Event) string {
	if ev.RawRef != "" {
		return ev.RawRef
	}
	return "an event without raw_ref"
}
