package tailer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultPoll is the fallback poll interval: a missed or impossible inotify
// notification costs at most this much latency.
const DefaultPoll = 250 * time.Millisecond

// WaitOptions shape one Wait.
type WaitOptions struct {
	// MaxWait is how long to wait for new lines before returning an empty
	// batch. Zero or negative: read once and return without blocking.
	MaxWait time.Duration
	// Linger: after the first new line arrives, keep collecting for this
	// long so a burst is handed over as one batch. Zero returns at once.
	Linger time.Duration
	// Poll is the fallback re-read interval (0 = DefaultPoll).
	Poll time.Duration
	// MaxBytes and MaxLine are as in Options, for the whole returned batch.
	MaxBytes int
	MaxLine  int
	// Stop is consulted on every wake (a file event or a poll tick), before
	// the read that follows it. Once it reports true, Wait returns what
	// that read found with Stopped set, so every line written before Stop
	// turned true is included (up to MaxBytes; Batch.More says when to read
	// again). For "the conductor exited": the log is fully drained once a
	// Stopped batch has More unset.
	Stop func() bool
}

// Waiter wakes a tail when its file, or the directory that will hold it,
// changes. It watches the file's directory rather than the file so that
// creation, deletion and replacement are seen too; while the directory does
// not exist it watches the nearest existing ancestor and moves down as the
// path appears. If inotify is unavailable (for example the per-user instance
// limit is reached) it silently degrades to polling.
//
// A Waiter's Wait must not be called concurrently. Close releases the watch.
type Waiter struct {
	path    string
	watcher *fsnotify.Watcher // nil: polling only
	wake    chan struct{}     // capacity 1: a pending wake, coalesced
	done    chan struct{}     // closed when the event loop has exited

	mu      sync.Mutex
	watched string // directory currently watched; "" = none

	closeOnce sync.Once
	closeErr  error

	// onBlock, if set, runs each time Wait is about to block; tests use it
	// to act only once the wait has read what is there.
	onBlock func()
}

// NewWaiter prepares to wait on path. It does not require path or its
// directory to exist.
func NewWaiter(path string) (*Waiter, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("tailer: resolve %s: %w", path, err)
	}
	w := &Waiter{path: abs, wake: make(chan struct{}, 1), done: make(chan struct{})}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		close(w.done)
		return w, nil
	}
	w.watcher = fw
	w.arm()
	go w.loop()
	return w, nil
}

// Watching returns the directory the Waiter currently watches, or "" when it
// only polls.
func (w *Waiter) Watching() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watched
}

// Close stops watching. It is idempotent and waits for the event goroutine.
func (w *Waiter) Close() error {
	w.closeOnce.Do(func() {
		if w.watcher == nil {
			return
		}
		if err := w.watcher.Close(); err != nil {
			w.closeErr = fmt.Errorf("tailer: close watcher for %s: %w", w.path, err)
			return
		}
		<-w.done
	})
	return w.closeErr
}

func (w *Waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Waiter) loop() {
	defer close(w.done)
	events, errs := w.watcher.Events, w.watcher.Errors
	for events != nil || errs != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			w.handle(ev)
		case _, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Typically a queue overflow: events were lost, so re-read.
			w.signal()
		}
	}
}

func (w *Waiter) handle(ev fsnotify.Event) {
	name := filepath.Clean(ev.Name)
	if name == w.path {
		w.signal()
		return
	}
	// A directory on the way to the file appeared, vanished or moved: the
	// deepest existing one is what must be watched now.
	if strings.HasPrefix(w.path, name+string(filepath.Separator)) {
		w.arm()
		w.signal()
	}
}

// arm watches the deepest existing directory on the file's path. It re-checks
// after adding the watch, because a deeper directory created in between would
// otherwise only be noticed by the poll.
func (w *Waiter) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for range 8 {
		dir := deepestDir(filepath.Dir(w.path))
		if dir == w.watched {
			return
		}
		if dir == "" || w.watcher.Add(dir) != nil {
			w.unwatchLocked()
			return
		}
		old := w.watched
		w.watched = dir
		if old != "" {
			_ = w.watcher.Remove(old) // fails harmlessly if it was deleted
		}
	}
}

func (w *Waiter) unwatchLocked() {
	if w.watched != "" {
		_ = w.watcher.Remove(w.watched)
		w.watched = ""
	}
}

func deepestDir(dir string) string {
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Wait opens a Waiter for path, waits once and closes it. Activities that
// wait repeatedly on the same file can keep a Waiter instead.
func Wait(ctx context.Context, path string, c Cursor, opts WaitOptions) (Batch, error) {
	w, err := NewWaiter(path)
	if err != nil {
		return Batch{Next: c}, err
	}
	defer w.Close()
	return w.Wait(ctx, c, opts)
}

// Wait returns as soon as complete lines after c exist (after Linger, to
// batch a burst), when opts.Stop reports true, after MaxWait with an empty
// batch, or when ctx is done (with ctx's error and whatever was read so far;
// Next always matches the Lines returned). Truncated is set if any read in
// between restarted the file; Missing reflects the last read.
func (w *Waiter) Wait(ctx context.Context, c Cursor, opts WaitOptions) (Batch, error) {
	ro := Options{MaxBytes: opts.MaxBytes, MaxLine: opts.MaxLine}.withDefaults()
	poll := opts.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	// Wakes from before this call are covered by the first read below, and
	// any event after this point leaves a pending wake for the select.
	select {
	case <-w.wake:
	default:
	}

	var maxWait, linger <-chan time.Time
	if opts.MaxWait > 0 {
		t := time.NewTimer(opts.MaxWait)
		defer t.Stop()
		maxWait = t.C
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()

	acc := Batch{Next: c}
	used := 0
	for {
		if err := ctx.Err(); err != nil {
			return acc, err
		}
		stopped := opts.Stop != nil && opts.Stop()
		b, err := read(w.path, acc.Next, ro, ro.MaxBytes-used, used == 0)
		if err != nil {
			return acc, err
		}
		progressed := b.Next != acc.Next
		for _, l := range b.Lines {
			if !l.TooLong {
				used += len(l.Data) + 1
			}
		}
		acc.Lines = append(acc.Lines, b.Lines...)
		acc.Next = b.Next
		acc.Truncated = acc.Truncated || b.Truncated
		acc.Missing = b.Missing
		acc.More = b.More

		acc.Stopped = stopped
		switch {
		case stopped, opts.MaxWait <= 0:
			return acc, nil
		case len(acc.Lines) > 0 && (b.More || opts.Linger <= 0):
			return acc, nil
		case b.More && progressed:
			continue // e.g. still scanning past an overlong line
		}
		if len(acc.Lines) > 0 && linger == nil {
			t := time.NewTimer(opts.Linger)
			defer t.Stop()
			linger = t.C
		}
		if w.onBlock != nil {
			w.onBlock()
		}
		select {
		case <-ctx.Done():
			return acc, ctx.Err()
		case <-maxWait:
			return acc, nil
		case <-linger:
			return acc, nil
		case <-w.wake:
		case <-tick.C:
		}
	}
}
