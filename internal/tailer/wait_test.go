package tailer

import (
	"context"
	"errors"
	"fmt"
	"karvi-edda-temporal/testkit/wait"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// safety is only a net against hangs; no assertion depends on timing.
const safety = 20 * time.Second

// never disables the poll fallback, so a prompt return proves the inotify
// path woke the wait.
const never = time.Hour

type waitResult struct {
	b   Batch
	err error
}

func waitAsync(ctx context.Context, w *Waiter, c Cursor, opts WaitOptions) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		b, err := w.Wait(ctx, c, opts)
		ch <- waitResult{b, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(safety):
		t.Fatal("Wait did not return")
		return waitResult{}
	}
}

// newWaiter returns a Waiter and a channel that receives each time its Wait
// is about to block, i.e. after it has read what was there.
func newWaiter(t *testing.T, path string) (*Waiter, <-chan struct{}) {
	t.Helper()
	w, err := NewWaiter(path)
	if err != nil {
		t.Fatal(err)
	}
	blocked := make(chan struct{}, 100)
	w.onBlock = func() {
		select {
		case blocked <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w, blocked
}

func awaitBlocked(t *testing.T, blocked <-chan struct{}) {
	t.Helper()
	select {
	case <-blocked:
	case <-time.After(safety):
		t.Fatal("Wait never blocked")
	}
}

func TestWaitWakesOnAppend(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "first\n")
	w, blocked := newWaiter(t, p)
	if w.Watching() != filepath.Dir(p) {
		t.Fatalf("watching %q, want the file's directory", w.Watching())
	}
	b, err := w.Wait(context.Background(), Cursor{}, WaitOptions{MaxWait: safety, Poll: never})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, b, "first")

	ch := waitAsync(context.Background(), w, b.Next, WaitOptions{MaxWait: 2 * safety, Poll: never})
	awaitBlocked(t, blocked)
	appendTo(t, p, "sec")
	appendTo(t, p, "ond\n")
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantLines(t, r.b, "second")
	if r.b.Stopped || r.b.Next.Offset != int64(len("first\nsecond\n")) {
		t.Fatalf("next = %+v", r.b.Next)
	}
}

func TestWaitFollowsDirectoryCreation(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, ".edda", "conductor", "karvi-t5")
	p := filepath.Join(dir, "events.jsonl")
	w, blocked := newWaiter(t, p)
	if w.Watching() != root {
		t.Fatalf("watching %q, want nearest existing ancestor %q", w.Watching(), root)
	}
	ch := waitAsync(context.Background(), w, Cursor{}, WaitOptions{MaxWait: 2 * safety, Poll: never})
	awaitBlocked(t, blocked)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	appendTo(t, p, `{"seq":0}`+"\n")
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantLines(t, r.b, `{"seq":0}`)
	if r.b.Missing {
		t.Fatal("Missing set although the file exists now")
	}
	if w.Watching() != dir {
		t.Fatalf("watching %q after creation, want %q", w.Watching(), dir)
	}
}

func TestWaitSeesReplacement(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "events.jsonl")
	appendTo(t, p, "old\n")
	w, blocked := newWaiter(t, p)
	b, err := w.Wait(context.Background(), Cursor{}, WaitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ch := waitAsync(context.Background(), w, b.Next, WaitOptions{MaxWait: 2 * safety, Poll: never})
	awaitBlocked(t, blocked)
	tmp := filepath.Join(dir, "tmp")
	appendTo(t, tmp, "new\n")
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantLines(t, r.b, "new")
	if !r.b.Truncated || r.b.Next.Gen != 1 {
		t.Fatalf("replacement not reported: %+v", r.b)
	}
}

func TestWaitEmptyAfterMaxWait(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "done\npartial")
	c := Cursor{}
	b, err := Read(p, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Wait(context.Background(), p, b.Next, WaitOptions{MaxWait: 30 * time.Millisecond, Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Lines) != 0 || got.Next != b.Next || got.Missing {
		t.Fatalf("expected an empty batch at the same cursor: %+v", got)
	}
}

func TestWaitMissingFileTimesOut(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope", "events.jsonl")
	c := Cursor{Gen: 1}
	got, err := Wait(context.Background(), p, c, WaitOptions{MaxWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Missing || got.Next != c || len(got.Lines) != 0 {
		t.Fatalf("missing: %+v", got)
	}
}

func TestWaitZeroMaxWaitReadsOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "a\nb\n")
	got, err := Wait(context.Background(), p, Cursor{}, WaitOptions{Linger: never})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, got, "a", "b")
}

func TestWaitLingerCollectsUntilBudgetFull(t *testing.T) {
	// With an endless linger the only way out is the byte budget, so the
	// returned batch proves the second line was collected into the first.
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "12345\n")
	w, blocked := newWaiter(t, p)
	ch := waitAsync(context.Background(), w, Cursor{}, WaitOptions{MaxWait: 2 * safety, Linger: never, Poll: never, MaxBytes: 12})
	awaitBlocked(t, blocked) // lingering with the first line in hand
	appendTo(t, p, "abcde\nnot-this-one\n")
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantLines(t, r.b, "12345", "abcde")
	if !r.b.More || r.b.Next.Offset != 12 {
		t.Fatalf("batch should stop at the budget with More: %+v", r.b)
	}
}

func TestWaitStopReturnsWhatIsThere(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "last\npart")
	got, err := Wait(context.Background(), p, Cursor{}, WaitOptions{MaxWait: safety, Linger: never, Stop: func() bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, got, "last")
	if !got.Stopped || got.More {
		t.Fatalf("stopped batch: %+v", got)
	}
}

func TestWaitStopLater(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "x\n")
	var exited atomic.Bool
	w, blocked := newWaiter(t, p)
	ch := waitAsync(context.Background(), w, Cursor{Offset: 2}, WaitOptions{
		MaxWait: 2 * safety, Poll: 5 * time.Millisecond,
		Stop: exited.Load,
	})
	// Stop has been consulted while false; the poll must notice the flip.
	awaitBlocked(t, blocked)
	exited.Store(true)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.b.Lines) != 0 || r.b.Next.Offset != 2 || !r.b.Stopped {
		t.Fatalf("stop with nothing new: %+v", r.b)
	}
}

func TestWaitContextCancel(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	w, blocked := newWaiter(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	ch := waitAsync(ctx, w, Cursor{}, WaitOptions{MaxWait: 2 * safety, Poll: never})
	awaitBlocked(t, blocked)
	cancel()
	r := await(t, ch)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", r.err)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestWaitLeaksNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "a\n")
	// Warm up lazily started runtime goroutines and descriptors.
	if _, err := Wait(context.Background(), p, Cursor{}, WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	g0, fd0 := runtime.NumGoroutine(), countFDs(t)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 50 {
		if _, err := Wait(context.Background(), p, Cursor{}, WaitOptions{MaxWait: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if _, err := Wait(ctx, p, Cursor{Offset: 2}, WaitOptions{MaxWait: safety}); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	w, err := NewWaiter(p)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // Close is idempotent
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}

	wait.EventuallyEvery(t, safety, time.Millisecond, fmt.Sprintf("goroutines back to %d", g0), func() (any, bool) {
		g := runtime.NumGoroutine()
		return g, g <= g0
	})
	if fd := countFDs(t); fd > fd0 {
		t.Fatalf("file descriptors %d -> %d", fd0, fd)
	}
}

func TestPollFallbackWithoutInotify(t *testing.T) {
	// What NewWaiter degrades to when no inotify instance can be had.
	p := filepath.Join(t.TempDir(), "events.jsonl")
	blocked := make(chan struct{}, 1)
	done := make(chan struct{})
	close(done)
	w := &Waiter{path: p, wake: make(chan struct{}, 1), done: done, onBlock: func() {
		select {
		case blocked <- struct{}{}:
		default:
		}
	}}
	if w.Watching() != "" {
		t.Fatal("poll-only waiter claims a watch")
	}
	ch := waitAsync(context.Background(), w, Cursor{}, WaitOptions{MaxWait: 2 * safety, Poll: 5 * time.Millisecond})
	awaitBlocked(t, blocked)
	appendTo(t, p, "polled\n")
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantLines(t, r.b, "polled")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Waiters share one inotify instance: many of them cost one descriptor,
// each still wakes on its own file only, and the instance goes away with
// the last of them.
func TestWaitersShareOneInstance(t *testing.T) {
	dir := t.TempDir()
	fd0 := countFDs(t)
	const n = 200 // more than the kernel's default 128 instances per user
	ws := make([]*Waiter, n)
	blocked := make([]<-chan struct{}, n)
	for i := range ws {
		ws[i], blocked[i] = newWaiter(t, filepath.Join(dir, "t"+string(rune('a'+i%26))+string(rune('a'+i/26)), "events.jsonl"))
	}
	if fd := countFDs(t); fd > fd0+1 {
		t.Fatalf("%d waiters hold %d descriptors, want 1", n, fd-fd0)
	}
	// The files' directories do not exist yet: every waiter watches dir.
	for i, w := range ws {
		if w.Watching() != dir {
			t.Fatalf("waiter %d watches %q, want %q", i, w.Watching(), dir)
		}
	}
	target := 137
	ch := waitAsync(context.Background(), ws[target], Cursor{}, WaitOptions{MaxWait: 2 * safety, Poll: never})
	// The other wait ends by its MaxWait; whenever that is, it must have
	// seen nothing of the target's file.
	other := waitAsync(context.Background(), ws[3], Cursor{}, WaitOptions{MaxWait: 300 * time.Millisecond, Poll: never})
	awaitBlocked(t, blocked[target])
	if err := os.MkdirAll(filepath.Dir(ws[target].path), 0o755); err != nil {
		t.Fatal(err)
	}
	appendTo(t, ws[target].path, "mine\n")
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantLines(t, r.b, "mine")
	if ws[target].Watching() != filepath.Dir(ws[target].path) {
		t.Fatalf("waiter moved to %q, want its file's directory", ws[target].Watching())
	}
	if r := await(t, other); r.err != nil || len(r.b.Lines) != 0 || !r.b.Missing {
		t.Fatalf("unrelated waiter: %+v, %v", r.b, r.err)
	}
	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if fd := countFDs(t); fd > fd0 {
		t.Fatalf("descriptors %d -> %d after every waiter closed", fd0, fd)
	}
}

// A directory Waiter wakes for any file of its directory, the directory's
// own creation included, and not for its neighbours.
func TestDirWaiterWakesOnAnyFileInIt(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "transcripts")
	w, err := NewDirWaiter(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Watching() != root {
		t.Skipf("inotify unavailable here (watching %q)", w.Watching())
	}
	woken := func(what string) {
		t.Helper()
		select {
		case <-w.Wake():
		case <-time.After(safety):
			t.Fatalf("no wake after %s", what)
		}
	}
	appendTo(t, filepath.Join(root, "events.jsonl"), "beside it\n")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	woken("the directory appeared")
	wait.Eventually(t, safety, "the Waiter moves down into the new directory", func() (any, bool) {
		return w.Watching(), w.Watching() == dir
	})
	for len(w.Wake()) > 0 {
		<-w.Wake()
	}
	appendTo(t, filepath.Join(dir, "implement-1.jsonl"), "line\n")
	woken("a transcript was written")
	// One write is several notifications (create, modify, close): let
	// the rest of them land before the file beside the directory.
	time.Sleep(100 * time.Millisecond)
	for len(w.Wake()) > 0 {
		<-w.Wake()
	}
	appendTo(t, filepath.Join(root, "events.jsonl"), "beside it\n")
	select {
	case <-w.Wake():
		t.Fatal("woken by a file outside the directory")
	case <-time.After(200 * time.Millisecond):
	}
}
