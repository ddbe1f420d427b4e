package eventstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"karvi-edda-temporal/internal/tailer"
)

// ErrOffset is a read from an offset that is not the start of a line of
// the stream: beyond its end, inside a line, or in a file that has since
// shrunk. A reader's cursor only ever comes from a page's Next, so this is
// a wrong -since or a stream someone else rewrote; retrying cannot help.
var ErrOffset = errors.New("not the start of an event in the stream")

// Page is a run of whole events from a stream, as stored (one JSON object
// per line, without the newline), and the offset of the next one.
type Page struct {
	Lines []string
	// Next is the byte offset after the last line: where the next read
	// starts. It counts every stored byte, so it equals the size of what a
	// reader printed with one line per event.
	Next int64
	// Missing: the stream has no file yet (nothing was appended).
	Missing bool
}

// ReadOptions bound one Read.
type ReadOptions struct {
	// Wait is how long to wait for an event past the offset when there is
	// none yet; zero reads what is there and returns.
	Wait time.Duration
	// Linger keeps collecting for this long after the first new event, so
	// a burst (a phase's end and the next one's start) comes as one page.
	Linger time.Duration
	// MaxBytes bounds a page (0: the tailer's default); a page always has
	// at least one event when there is one.
	MaxBytes int
	// Poll is the fallback interval when file notifications are missed.
	Poll time.Duration
}

// Read returns the events stored after byte offset from, waiting up to
// o.Wait for the first one. from must be 0 or the Next of an earlier page.
func (s *Store) Read(ctx context.Context, runID string, from int64, o ReadOptions) (Page, error) {
	path, err := s.Path(runID)
	if err != nil {
		return Page{}, err
	}
	if err := lineStart(path, from); err != nil {
		return Page{Next: from}, err
	}
	b, err := tailer.Wait(ctx, path, tailer.Cursor{Offset: from}, tailer.WaitOptions{
		MaxWait: o.Wait, Linger: o.Linger, MaxBytes: o.MaxBytes, MaxLine: MaxLine, Poll: o.Poll,
	})
	if err != nil {
		return Page{Next: from}, fmt.Errorf("eventstream: read %s from %d: %w", path, from, err)
	}
	if b.Truncated {
		// Appends never shrink a stream below a line a reader was given.
		return Page{Next: from}, fmt.Errorf("%w: %s shrank below offset %d", ErrOffset, path, from)
	}
	p := Page{Next: b.Next.Offset, Missing: b.Missing}
	for _, l := range b.Lines {
		if !l.TooLong {
			p.Lines = append(p.Lines, string(l.Data))
		}
	}
	return p, nil
}

// lineStart checks that from is where a line of the file begins.
func lineStart(path string, from int64) error {
	if from < 0 {
		return fmt.Errorf("%w: offset %d is negative", ErrOffset, from)
	}
	if from == 0 {
		return nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: offset %d, and the stream has no file", ErrOffset, from)
	}
	if err != nil {
		return fmt.Errorf("eventstream: open %s: %w", path, err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], from-1); err == io.EOF {
		return fmt.Errorf("%w: offset %d is past the end of %s", ErrOffset, from, path)
	} else if err != nil {
		return fmt.Errorf("eventstream: read %s: %w", path, err)
	}
	if b[0] != '\n' {
		return fmt.Errorf("%w: offset %d is inside a line of %s", ErrOffset, from, path)
	}
	return nil
}
