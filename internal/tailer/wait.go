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
// Every Waiter of a process shares one inotify instance (see hub): a worker
// tails one log per running task, and the kernel's default limit of 128
// instances per user would otherwise turn every tail past the 128th into a
// 250 ms poll, and make each poll pay for creating and closing an instance.
//
// A Waiter's Wait must not be called concurrently. Close releases the watch.
type Waiter struct {
	path string
	// dirWide wakes on a change to any file in path's directory
	// (NewDirWaiter), not only path.
	dirWide bool
	hub     *hub          // nil: polling only
	wake    chan struct{} // capacity 1: a pending wake, coalesced
	// done is closed once the Waiter no longer receives events (Close).
	done chan struct{}

	mu      sync.Mutex
	watched string // directory currently watched; "" = none
	closed  bool   // set by Close: an event still in flight must not re-arm

	closeOnce sync.Once
	closeErr  error

	// onBlock, if set, runs each time Wait is about to block; tests use it
	// to act only once the wait has read what is there.
	onBlock func()
}

// NewWaiter prepares to wait on path. It does not require path or its
// directory to exist.
func NewWaiter(path string) (*Waiter, error) {
	return openWaiter(path, false)
}

// NewDirWaiter prepares to be woken (Wake) by any change in dir: a file
// in it created, written, moved or removed, or dir itself appearing. It
// does not require dir to exist.
func NewDirWaiter(dir string) (*Waiter, error) {
	return openWaiter(filepath.Join(dir, "*"), true)
}

func openWaiter(path string, dirWide bool) (*Waiter, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("tailer: resolve %s: %w", path, err)
	}
	w := &Waiter{path: abs, dirWide: dirWide, wake: make(chan struct{}, 1), done: make(chan struct{})}
	h, err := joinHub(w)
	if err != nil {
		close(w.done)
		return w, nil
	}
	w.hub = h
	w.arm()
	return w, nil
}

// Wake receives once after each change (coalesced) of what the Waiter
// watches. It never receives while the Waiter only polls (Watching is "").
// For a NewDirWaiter's; Wait takes the wakes of a NewWaiter's itself.
func (w *Waiter) Wake() <-chan struct{} { return w.wake }

// Watching returns the directory the Waiter currently watches, or "" when it
// only polls.
func (w *Waiter) Watching() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watched
}

// Close stops watching. It is idempotent; once it returns the Waiter gets
// no more events, and the shared inotify instance is closed when its last
// Waiter closes.
func (w *Waiter) Close() error {
	w.closeOnce.Do(func() {
		if w.hub == nil {
			return
		}
		w.mu.Lock()
		w.closed = true
		w.unwatchLocked()
		w.mu.Unlock()
		if err := w.hub.leave(w); err != nil {
			w.closeErr = fmt.Errorf("tailer: close watcher for %s: %w", w.path, err)
		}
		close(w.done)
	})
	return w.closeErr
}

func (w *Waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Waiter) handle(ev fsnotify.Event) {
	name := filepath.Clean(ev.Name)
	if name == w.path || (w.dirWide && filepath.Dir(name) == filepath.Dir(w.path)) {
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
	if w.closed {
		return
	}
	for range 8 {
		dir := deepestDir(filepath.Dir(w.path))
		if dir == w.watched {
			return
		}
		if dir == "" || w.hub.watch(dir, w) != nil {
			w.unwatchLocked()
			return
		}
		old := w.watched
		w.watched = dir
		if old != "" {
			w.hub.unwatch(old, w)
		}
	}
}

func (w *Waiter) unwatchLocked() {
	if w.watched != "" {
		w.hub.unwatch(w.watched, w)
		w.watched = ""
	}
}

// hub is the process's one inotify instance, shared by every Waiter: it
// watches each directory once, however many Waiters need it, and hands each
// event to the Waiters watching the directory it happened in (or, for the
// directory itself, the Waiters watching it).
type hub struct {
	watcher *fsnotify.Watcher
	done    chan struct{} // closed when the event loop has exited

	mu      sync.Mutex
	members int                             // open Waiters
	dirs    map[string]map[*Waiter]struct{} // watched directory -> its Waiters
}

var (
	hubMu  sync.Mutex
	shared *hub
)

// joinHub returns the shared hub, creating it (and its inotify instance)
// for the first Waiter.
func joinHub(w *Waiter) (*hub, error) {
	hubMu.Lock()
	defer hubMu.Unlock()
	if shared == nil {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, err
		}
		shared = &hub{watcher: fw, done: make(chan struct{}), dirs: map[string]map[*Waiter]struct{}{}}
		go shared.loop()
	}
	shared.mu.Lock()
	shared.members++
	shared.mu.Unlock()
	return shared, nil
}

// leave drops a Waiter; the last one closes the inotify instance and waits
// for the event loop, so nothing outlives the Waiters.
func (h *hub) leave(w *Waiter) error {
	hubMu.Lock()
	defer hubMu.Unlock()
	h.mu.Lock()
	h.members--
	last := h.members == 0
	h.mu.Unlock()
	if !last {
		return nil
	}
	shared = nil
	err := h.watcher.Close()
	<-h.done
	return err
}

func (h *hub) watch(dir string, w *Waiter) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.dirs[dir]
	if ws == nil {
		if err := h.watcher.Add(dir); err != nil {
			return err
		}
		ws = map[*Waiter]struct{}{}
		h.dirs[dir] = ws
	}
	ws[w] = struct{}{}
	return nil
}

func (h *hub) unwatch(dir string, w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.dirs[dir]
	delete(ws, w)
	if ws != nil && len(ws) == 0 {
		delete(h.dirs, dir)
		_ = h.watcher.Remove(dir) // fails harmlessly if it was deleted
	}
}

// waitersFor lists the Waiters an event concerns: those watching the
// directory it happened in, and those watching the path itself when it is a
// watched directory (its own deletion or move).
func (h *hub) waitersFor(name string) []*Waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*Waiter
	for w := range h.dirs[filepath.Dir(name)] {
		out = append(out, w)
	}
	for w := range h.dirs[name] {
		out = append(out, w)
	}
	return out
}

func (h *hub) all() []*Waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*Waiter
	for _, ws := range h.dirs {
		for w := range ws {
			out = append(out, w)
		}
	}
	return out
}

func (h *hub) loop() {
	defer close(h.done)
	events, errs := h.watcher.Events, h.watcher.Errors
	for events != nil || errs != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Handlers run without h.mu: re-arming takes it.
			for _, w := range h.waitersFor(filepath.Clean(ev.Name)) {
				w.handle(ev)
			}
		case _, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Typically a queue overflow: events were lost, so every
			// Waiter re-reads.
			for _, w := range h.all() {
				w.signal()
			}
		}
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
