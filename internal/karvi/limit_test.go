package karvi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/testkit/karvifake"
)

func startFake(t *testing.T, opts karvifake.Options, tasks ...karvifake.Task) (*karvifake.Server, string) {
	t.Helper()
	srv := karvifake.New(opts)
	for _, tk := range tasks {
		if err := srv.AddTask(tk); err != nil {
			t.Fatal(err)
		}
	}
	url, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, url
}

func newClient(t *testing.T, url string, opts ...karvi.Option) *karvi.Client {
	t.Helper()
	c, err := karvi.New(url, "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Two clients of one karvi address draw from one bucket: together they
// send more than karvi's burst and karvi never refuses one request.
func TestClientsOfOneAddressShareOneLimit(t *testing.T) {
	const perMinute = 600 // a bucket of 600 refilled at 10 a second
	srv, url := startFake(t, karvifake.Options{RateLimit: perMinute}, withBrief("T1", "in_progress"))
	a := newClient(t, url, karvi.WithRateLimit(perMinute))
	b := newClient(t, url, karvi.WithRateLimit(perMinute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 600)
	for i := range 20 {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 29 {
				errs <- c.UpdateTask(ctx, "T1", map[string]any{"result": map[string]any{"n": j}})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := srv.Stats()
	if st.Requests != 580 || st.Refused != 0 {
		t.Fatalf("karvi counted %+v, want 580 requests and no refusal", st)
	}
	if got := a.Stats(); got.Refused != 0 || got.Sent != 580 {
		t.Fatalf("client stats %+v, want 580 sent (both clients) and none refused", got)
	}
}

// A client without its own limit meets karvi's: the refused request waits
// out Retry-After, is sent again, and every request lands.
func TestRetryAfterIsHonoured(t *testing.T) {
	srv, url := startFake(t, karvifake.Options{RateLimit: 60}, withBrief("T1", "in_progress"))
	c := newClient(t, url, karvi.WithRateLimit(karvi.RateLimitOff))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 63 {
		if err := c.PatchBrief(ctx, "T1", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatalf("patch %d: %v", i, err)
		}
	}
	if n := len(srv.Writes("T1")); n != 63 {
		t.Fatalf("%d writes, want 63", n)
	}
	// One refusal per request past the burst at most: after a 429 the
	// client waits as told instead of asking again at once.
	if st := srv.Stats(); st.Refused < 1 || st.Refused > 3 {
		t.Fatalf("karvi refused %d requests, want 1 to 3", st.Refused)
	}
	if c.Stats().Refused != int64(srv.Stats().Refused) {
		t.Fatalf("client saw %d refusals, karvi sent %d", c.Stats().Refused, srv.Stats().Refused)
	}
}

// A Retry-After beyond the request's deadline fails at once, retryable.
func TestRetryAfterBeyondDeadlineIsTransient(t *testing.T) {
	srv, url := startFake(t, karvifake.Options{RateLimit: 1}, withBrief("T1", "in_progress"))
	c := newClient(t, url, karvi.WithRateLimit(karvi.RateLimitOff))
	if err := c.PatchBrief(context.Background(), "T1", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := c.PatchBrief(ctx, "T1", json.RawMessage(`{}`))
	if !karvi.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	if srv.Stats().Refused != 1 {
		t.Fatalf("refused %d, want 1: the client must not ask again inside Retry-After", srv.Stats().Refused)
	}
}

// A version conflict is retried, on the status and on the brief routes, in
// both of karvi's forms.
func TestVersionConflictIsRetried(t *testing.T) {
	srv, url := startFake(t, karvifake.Options{}, withBrief("T1", "dispatched"))
	c := newClient(t, url)
	ctx := context.Background()
	for _, code := range []int{http.StatusBadRequest, http.StatusServiceUnavailable} {
		if err := srv.InjectConflict(karvifake.Conflict{Route: "status", Nth: 1, Status: code}); err != nil {
			t.Fatal(err)
		}
		if err := srv.InjectConflict(karvifake.Conflict{Route: "brief", Nth: 1, Status: code}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetTaskStatus(ctx, "T1", "in_progress", ""); err != nil {
		t.Fatalf("status after a conflict: %v", err)
	}
	if err := c.PatchBrief(ctx, "T1", json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatalf("brief after a conflict: %v", err)
	}
	if tk, _ := srv.Task("T1"); tk.Status != "in_progress" {
		t.Fatalf("status %q", tk.Status)
	}
	if n := len(srv.Writes("T1")); n != 2 {
		t.Fatalf("%d writes, want 2", n)
	}
	// A conflict that persists is returned, retryable, never permanent.
	for range 5 {
		if err := srv.InjectConflict(karvifake.Conflict{Route: "status", Nth: 1}); err != nil {
			t.Fatal(err)
		}
	}
	err := c.SetTaskStatus(ctx, "T1", "blocked", "why")
	if !karvi.IsConflict(err) || !karvi.IsRetryable(err) || karvi.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable conflict", err)
	}
}

// Concurrent readers share one read of the board, and a status this
// process wrote shows in the shared snapshot without another read.
func TestBoardReadsAreShared(t *testing.T) {
	var tasks []karvifake.Task
	for i := range 20 {
		tasks = append(tasks, withBrief(fmt.Sprintf("T%d", i), "dispatched"))
	}
	srv, url := startFake(t, karvifake.Options{}, tasks...)
	srv.SetLatency(100 * time.Millisecond) // readers overlap
	c := newClient(t, url)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := c.GetTask(ctx, fmt.Sprintf("T%d", i))
			if err != nil || tk.Status != "dispatched" {
				t.Errorf("T%d: %+v %v", i, tk, err)
			}
		}()
	}
	wg.Wait()
	reads := c.Stats().BoardReads
	if reads > 2 {
		t.Fatalf("%d board reads for 20 concurrent readers, want 1 (2 at most)", reads)
	}
	srv.SetLatency(0)
	if err := c.SetTaskStatus(ctx, "T3", "in_progress", ""); err != nil {
		t.Fatal(err)
	}
	tk, err := c.GetTask(ctx, "T3")
	if err != nil || tk.Status != "in_progress" {
		t.Fatalf("T3 after this process wrote it: %+v %v", tk, err)
	}
	// Someone else moves a task: a fresh read sees it.
	if err := srv.SetStatus("T4", "cancelled", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	tk, err = c.GetTaskFresh(ctx, "T4")
	if err != nil || tk.Status != "cancelled" {
		t.Fatalf("T4 fresh: %+v %v", tk, err)
	}
	if !srv.DeleteTask("T5") {
		t.Fatal("T5 not deleted")
	}
	if _, err := c.GetTaskFresh(ctx, "T5"); !karvi.IsNotFound(err) {
		t.Fatalf("deleted task: %v, want not found", err)
	}
}

// Congested says when a brief write would wait for its turn.
func TestCongested(t *testing.T) {
	_, url := startFake(t, karvifake.Options{RateLimit: karvifake.RateLimitOff}, withBrief("T1", "in_progress"))
	c := newClient(t, url, karvi.WithRateLimit(12)) // a bucket of 10 locally
	ctx := context.Background()
	if c.Congested() {
		t.Fatal("congested before any request")
	}
	// Once half the bucket is used, brief writes are merged.
	for range 5 {
		if err := c.PatchBrief(ctx, "T1", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Congested() {
		t.Fatal("not congested with half the bucket used")
	}
	// Status writes still go at once while tokens are left.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for range 4 {
		if err := c.UpdateTask(short, "T1", map[string]any{"result": "r"}); err != nil {
			t.Fatalf("a status write waited behind brief writes: %v", err)
		}
	}
}

// Many tasks running at once make brief writes merge before half the
// bucket is used: each still needs a few requests (its status writes and
// one brief write), and a bucket that cannot cover them all is congested
// from the start. One task alone leaves the bucket's half as the mark, so
// its events still go one PATCH each.
func TestCongestedWhenTheTasksRunningNeedTheBucket(t *testing.T) {
	_, url := startFake(t, karvifake.Options{RateLimit: karvifake.RateLimitOff})
	c := newClient(t, url, karvi.WithRateLimit(120)) // a bucket of 108 locally
	one := c.Attend()
	if c.Congested() {
		t.Fatal("congested with one task running and a full bucket")
	}
	var done []func()
	for range 29 {
		done = append(done, c.Attend())
	}
	if !c.Congested() {
		t.Fatal("not congested with 30 tasks running that need more than the bucket")
	}
	for _, d := range done {
		d()
		d() // a second call counts once
	}
	if c.Congested() {
		t.Fatal("still congested once the tasks ended")
	}
	one()
}

// Requests sent much faster than the limit refills make brief writes merge
// before half the bucket is used: at that pace the bucket would be empty
// within seconds (many tasks starting at once, before they are all
// counted as running). One task's events at an ordinary pace do not.
func TestCongestedWhenRequestsOutpaceTheRefill(t *testing.T) {
	_, url := startFake(t, karvifake.Options{RateLimit: karvifake.RateLimitOff}, withBrief("T1", "in_progress"))
	c := newClient(t, url, karvi.WithRateLimit(120)) // a bucket of 108 locally
	ctx := context.Background()
	defer c.Attend()()
	// A few PATCHes at a walking pace: not congested.
	for range 3 {
		if err := c.PatchBrief(ctx, "T1", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
	}
	if c.Congested() {
		t.Fatal("congested after three requests at a walking pace")
	}
	// Thirty at once, a fifth of the bucket: at this pace the rest goes
	// in a couple of seconds.
	for range 30 {
		if err := c.PatchBrief(ctx, "T1", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Congested() {
		t.Fatal("not congested while requests outpace the refill by far")
	}
}
