package sink_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/testkit/karvifake"
)

func karviSink(t *testing.T, opts []sink.KarviOption, tasks ...karvifake.Task) (*karvifake.Server, *sink.Karvi) {
	t.Helper()
	fake := karvifake.New(karvifake.Options{Now: clock, Token: "tok"})
	for _, tk := range tasks {
		if err := fake.AddTask(tk); err != nil {
			t.Fatal(err)
		}
	}
	url, err := fake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	c, err := karvi.New(url, "tok")
	if err != nil {
		t.Fatal(err)
	}
	return fake, sink.NewKarvi(c, opts...)
}

// describe renders writes as "status:in_progress", "update:result", ...
func describe(ws []karvifake.Write) string {
	var out []string
	for _, w := range ws {
		var b map[string]any
		_ = json.Unmarshal(w.Body, &b)
		switch {
		case strings.HasSuffix(w.Path, "/status"):
			s := "status:" + b["status"].(string)
			if r, ok := b["reason"]; ok {
				s += "(" + r.(string) + ")"
			}
			out = append(out, s)
		case strings.HasSuffix(w.Path, "/update"):
			var keys []string
			for _, k := range []string{"status", "blocker", "result"} {
				if _, ok := b[k]; ok {
					keys = append(keys, k)
				}
			}
			out = append(out, "update:"+strings.Join(keys, "+"))
		default:
			out = append(out, w.Method+":brief")
		}
	}
	return strings.Join(out, " ")
}

// The last step and the dispatch result go together through /update: one
// request fewer than a status write and an update.
func TestKarviDispatchedToCompletedGoesThroughInProgress(t *testing.T) {
	fake, ks := karviSink(t, nil, karvifake.Task{ID: "T5", Status: "dispatched"})
	ctx := context.Background()
	u := sink.StatusUpdate{Status: "completed", DispatchState: "completed", PlanID: "disp_001", PlanName: "karvi-t5"}
	if err := ks.SetStatus(ctx, "T5", u); err != nil {
		t.Fatal(err)
	}
	if got := describe(fake.Writes("T5")); got != "status:in_progress update:status+result" {
		t.Fatalf("writes: %s", got)
	}
	tk, _ := fake.Task("T5")
	var res map[string]any
	if err := json.Unmarshal(tk.Result, &res); err != nil {
		t.Fatal(err)
	}
	d := res["dispatch"].(map[string]any)
	if tk.Status != "completed" || d["state"] != "completed" || d["planId"] != "disp_001" || d["lastError"] != nil || res["summary"] != "edda plan karvi-t5 completed" {
		t.Fatalf("task %s result %s", tk.Status, tk.Result)
	}
	// Idempotent: the same update again sends nothing.
	if err := ks.SetStatus(ctx, "T5", u); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Writes("T5")); n != 2 {
		t.Fatalf("repeat sent %d more writes", n-2)
	}
}

func TestKarviBlockedCarriesReason(t *testing.T) {
	fake, ks := karviSink(t, nil, karvifake.Task{ID: "T5", Status: "in_progress"})
	ctx := context.Background()
	u := sink.StatusUpdate{Status: "blocked", Reason: "Phase test failed: cmd `cargo test` exited 1", AskedAt: "2026-02-28T03:10:00Z",
		DispatchState: "failed", LastError: "Phase test failed after 3 attempts: cmd `cargo test` exited 1"}
	if err := ks.SetStatus(ctx, "T5", u); err != nil {
		t.Fatal(err)
	}
	if got := describe(fake.Writes("T5")); got != "status:blocked("+u.Reason+") update:result" {
		t.Fatalf("writes: %s", got)
	}
	tk, _ := fake.Task("T5")
	if tk.Status != "blocked" || tk.Blocker == nil || tk.Blocker.Reason != u.Reason || tk.Blocker.AskedAt == "" {
		t.Fatalf("task %s blocker %+v", tk.Status, tk.Blocker)
	}
	if !strings.Contains(string(tk.Result), `"lastError":"Phase test failed after 3 attempts`) {
		t.Fatalf("result %s", tk.Result)
	}
	// Already blocked, new reason: only the blocker is rewritten, with the
	// caller's time.
	u2 := sink.StatusUpdate{Status: "blocked", Reason: "Plan aborted by user", AskedAt: "2026-02-28T03:11:00Z"}
	if err := ks.SetStatus(ctx, "T5", u2); err != nil {
		t.Fatal(err)
	}
	tk, _ = fake.Task("T5")
	if tk.Blocker.Reason != "Plan aborted by user" || tk.Blocker.AskedAt != "2026-02-28T03:11:00Z" {
		t.Fatalf("blocker %+v", tk.Blocker)
	}
	if got := describe(fake.Writes("T5")); !strings.HasSuffix(got, " update:blocker") {
		t.Fatalf("writes: %s", got)
	}
	// Redispatch: blocked -> dispatched in one step, blocker cleared.
	if err := ks.SetStatus(ctx, "T5", sink.StatusUpdate{Status: "dispatched", DispatchState: "dispatching"}); err != nil {
		t.Fatal(err)
	}
	tk, _ = fake.Task("T5")
	if tk.Status != "dispatched" || tk.Blocker != nil {
		t.Fatalf("after redispatch: %s %+v", tk.Status, tk.Blocker)
	}
	if got := describe(fake.Writes("T5")); !strings.HasSuffix(got, "update:blocker status:dispatched") {
		t.Fatalf("writes: %s (a non-terminal dispatch state writes no result)", got)
	}
}

func TestKarviIllegalTargetIsPermanent(t *testing.T) {
	fake, ks := karviSink(t, nil, karvifake.Task{ID: "T5", Status: "approved"}, karvifake.Task{ID: "T6", Status: "completed"})
	ctx := context.Background()
	for id, target := range map[string]string{"T5": "in_progress", "T6": "blocked"} {
		err := ks.SetStatus(ctx, id, sink.StatusUpdate{Status: target, Reason: "x"})
		if !karvi.IsIllegalTransition(err) || karvi.IsRetryable(err) || !karvi.IsPermanent(err) {
			t.Fatalf("%s -> %s: err = %v", id, target, err)
		}
		if !strings.Contains(err.Error(), "Invalid task status transition:") {
			t.Fatalf("err text %q", err)
		}
	}
	if n := len(fake.Writes("")); n != 0 {
		t.Fatalf("%d writes sent for impossible targets", n)
	}
	if err := ks.SetStatus(ctx, "T5", sink.StatusUpdate{Status: "finished"}); karvi.KindOf(err) != karvi.KindBadRequest {
		t.Fatalf("bogus status err = %v", err)
	}
	if err := ks.SetStatus(ctx, "NOPE", sink.StatusUpdate{Status: "completed"}); !karvi.IsNotFound(err) {
		t.Fatalf("missing task err = %v", err)
	}
}

// Someone moves the task between our read and our write: the sink re-reads
// and re-plans instead of failing.
func TestKarviReplansWhenTaskMovesUnderIt(t *testing.T) {
	fake := karvifake.New(karvifake.Options{Now: clock})
	_ = fake.AddTask(karvifake.Task{ID: "T5", Status: "dispatched"})
	var once sync.Once
	inner := fake.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		if r.Method == http.MethodGet && r.URL.Path == "/api/tasks" {
			once.Do(func() { // after the sink's first read, karvi moves the task itself
				_ = fake.AddTask(karvifake.Task{ID: "T5", Status: "in_progress"})
			})
		}
	}))
	defer ts.Close()
	c, _ := karvi.New(ts.URL, "")
	if err := sink.NewKarvi(c).SetStatus(context.Background(), "T5", sink.StatusUpdate{Status: "completed"}); err != nil {
		t.Fatal(err)
	}
	tk, _ := fake.Task("T5")
	if tk.Status != "completed" {
		t.Fatalf("status %s", tk.Status)
	}
	if got := describe(fake.Writes("T5")); got != "status:completed" {
		t.Fatalf("accepted writes: %s", got)
	}
}

func TestKarviTransientFailuresRetryWithoutDuplicates(t *testing.T) {
	fake, ks := karviSink(t, nil, karvifake.Task{ID: "T5", Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)})
	ctx := context.Background()
	fake.FailNext(1, 503)
	err := ks.SetStatus(ctx, "T5", sink.StatusUpdate{Status: "completed"})
	if !karvi.IsRetryable(err) {
		t.Fatalf("err = %v, want retryable", err)
	}
	// The retry resumes from wherever karvi got to.
	b := karvi.Backoff{Initial: time.Millisecond, MaxAttempts: 5}
	fake.FailNext(1, 503)
	if err := karvi.RetryTransient(ctx, func(ctx context.Context) error {
		return ks.SetStatus(ctx, "T5", sink.StatusUpdate{Status: "completed"})
	}, b); err != nil {
		t.Fatal(err)
	}
	if got := describe(fake.Writes("T5")); got != "status:in_progress status:completed" {
		t.Fatalf("writes: %s", got)
	}
	fake.FailNext(2, 502)
	if err := karvi.RetryTransient(ctx, func(ctx context.Context) error {
		return ks.PatchBrief(ctx, "T5", json.RawMessage(`{"a":1}`))
	}, b); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Writes("T5")); n != 3 {
		t.Fatalf("%d writes, want 3", n)
	}
}

func TestKarviPatchBriefNoBrief(t *testing.T) {
	_, ks := karviSink(t, nil, karvifake.Task{ID: "T5", Status: "dispatched"})
	err := ks.PatchBrief(context.Background(), "T5", json.RawMessage(`{"a":1}`))
	if !karvi.IsNoBrief(err) || karvi.IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
}

func TestKarviWithoutDispatchResult(t *testing.T) {
	fake, ks := karviSink(t, []sink.KarviOption{sink.WithDispatchResult(false)}, karvifake.Task{ID: "T5", Status: "in_progress"})
	if err := ks.SetStatus(context.Background(), "T5", sink.StatusUpdate{Status: "completed", DispatchState: "completed"}); err != nil {
		t.Fatal(err)
	}
	if got := describe(fake.Writes("T5")); got != "status:completed" {
		t.Fatalf("writes: %s", got)
	}
}

// karvi's own rules at the status sink: a task cancelled on the board stays
// cancelled whatever an attempt would write; a deleted task has nothing to
// write to; a task stopped before it started (dispatched) reaches blocked
// the only legal way, through in_progress; a version conflict is retried.
func TestKarviSinkMeetsKarvisRules(t *testing.T) {
	fake, s := karviSink(t, nil,
		karvifake.Task{ID: "C1", Status: "in_progress"},
		karvifake.Task{ID: "D1", Status: "in_progress"},
		karvifake.Task{ID: "B1", Status: "dispatched"},
		karvifake.Task{ID: "V1", Status: "in_progress"})
	ctx := context.Background()
	// Read the board first, so the sink's shared snapshot is the stale one.
	if err := s.SetStatus(ctx, "V1", sink.StatusUpdate{Status: "in_progress"}); err != nil {
		t.Fatal(err)
	}
	if err := fake.SetStatus("C1", "cancelled", "not wanted"); err != nil {
		t.Fatal(err)
	}
	blocked := sink.StatusUpdate{Status: "blocked", Reason: "user abort", DispatchState: "failed"}
	if err := s.SetStatus(ctx, "C1", blocked); !errors.Is(err, sink.ErrBoardCancelled) {
		t.Fatalf("cancelled task: %v, want ErrBoardCancelled", err)
	}
	if tk, _ := fake.Task("C1"); tk.Status != "cancelled" {
		t.Fatalf("C1 is %s, want cancelled", tk.Status)
	}
	if ws := describe(fake.Writes("C1")); ws != "" {
		t.Fatalf("writes to the cancelled task: %s", ws)
	}

	fake.DeleteTask("D1")
	if err := s.SetStatus(ctx, "D1", sink.StatusUpdate{Status: "completed", DispatchState: "completed"}); !errors.Is(err, sink.ErrTaskGone) {
		t.Fatalf("deleted task: %v, want ErrTaskGone", err)
	}

	if err := s.SetStatus(ctx, "B1", blocked); err != nil {
		t.Fatalf("dispatched -> blocked: %v", err)
	}
	if ws := describe(fake.Writes("B1")); !strings.HasPrefix(ws, "status:in_progress status:blocked") {
		t.Fatalf("B1 writes %q, want in_progress then blocked", ws)
	}

	if err := fake.InjectConflict(karvifake.Conflict{Route: "status", TaskID: "V1", Nth: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetStatus(ctx, "V1", sink.StatusUpdate{Status: "completed", DispatchState: "completed"}); err != nil {
		t.Fatalf("after a version conflict: %v", err)
	}
	if tk, _ := fake.Task("V1"); tk.Status != "completed" {
		t.Fatalf("V1 is %s", tk.Status)
	}
}

// A pause leaves the task in_progress (no failure, and karvi keeps it: it
// deletes blocked tasks after six hours) and says why and until when in
// the task's result; the resume replaces that result.
func TestKarviPauseIsAResultNotABlocker(t *testing.T) {
	fake, ks := karviSink(t, nil, karvifake.Task{ID: "T5", Status: "in_progress"})
	ctx := context.Background()
	paused := sink.StatusUpdate{Status: "in_progress", DispatchState: "paused", PlanName: "karvi-t5",
		Reason: "paused: usage limit in phase test, resumes at 15:02:00 UTC"}
	if err := ks.SetStatus(ctx, "T5", paused); err != nil {
		t.Fatal(err)
	}
	tk, _ := fake.Task("T5")
	if tk.Status != "in_progress" || tk.Blocker != nil || !strings.Contains(string(tk.Result), `"summary":"paused: usage limit in phase test, resumes at 15:02:00 UTC"`) ||
		!strings.Contains(string(tk.Result), `"state":"paused"`) {
		t.Fatalf("task %s blocker %+v result %s", tk.Status, tk.Blocker, tk.Result)
	}
	resumed := sink.StatusUpdate{Status: "in_progress", DispatchState: "dispatching", Reason: "resumed: the limit's reset passed"}
	if err := ks.SetStatus(ctx, "T5", resumed); err != nil {
		t.Fatal(err)
	}
	tk, _ = fake.Task("T5")
	if tk.Status != "in_progress" || !strings.Contains(string(tk.Result), `"state":"dispatching"`) {
		t.Fatalf("after resume: %s %s", tk.Status, tk.Result)
	}
	if got := describe(fake.Writes("T5")); got != "update:result update:result" {
		t.Fatalf("writes: %s", got)
	}
}
