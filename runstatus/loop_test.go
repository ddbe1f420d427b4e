package runstatus

import (
	"errors"
	"testing"
	"time"
)

func TestLoopedCountsWhileRunning(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run := parseRun(t, `{"title":"loops","tasks":[{"id":"a","title":"A","complexity":2},{"id":"b","title":"B","complexity":7}]}`)
	s := New(run, at)
	if err := s.Looped("a"); !errors.Is(err, ErrTransition) {
		t.Fatalf("loop of a queued task: %v, want ErrTransition", err)
	}
	if err := s.Start(at); err != nil {
		t.Fatal(err)
	}
	if err := s.TaskStarted("a", "", at); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= StallLoops; i++ {
		if err := s.Looped("a"); err != nil {
			t.Fatal(err)
		}
		if got := s.Tasks["a"].LoopCount; got != i {
			t.Fatalf("loop_count = %d after %d loops", got, i)
		}
	}
	if left, _ := s.LoopsLeft("a"); left != 0 {
		t.Fatalf("loops left = %d, want 0", left)
	}
	if !s.CanUpgrade("a") || s.CanUpgrade("b") || s.CanUpgrade("nope") {
		t.Fatalf("CanUpgrade: a=%v b=%v", s.CanUpgrade("a"), s.CanUpgrade("b"))
	}
	esc, err := s.LoopLimitReached("a", 0, at)
	if err != nil || esc != Upgraded {
		t.Fatalf("LoopLimitReached = %v, %v", esc, err)
	}
	if s.CanUpgrade("a") {
		t.Fatal("a task upgraded once can be upgraded again")
	}
	if err := s.Looped("zz"); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("unknown task: %v", err)
	}
}

func TestAbortWithNamesTheReason(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run := parseRun(t, `{"title":"abort","tasks":[{"id":"a","title":"A"},{"id":"b","title":"B"},{"id":"c","title":"C","depends":["a"]}]}`)
	s := New(run, at)
	require(t, s.Start(at))
	require(t, s.TaskStarted("a", "", at))
	require(t, s.TaskStarted("b", "", at))
	require(t, s.TaskEnded("b", Done, 1, at))
	require(t, s.AbortWith("Budget exceeded ($0.62 spent of $0.50)", at))
	if s.Tasks["a"].Status != TaskFailed || s.Tasks["a"].Error != "Budget exceeded ($0.62 spent of $0.50)" {
		t.Fatalf("a = %+v", s.Tasks["a"])
	}
	if s.Tasks["b"].Error != "" || s.Tasks["c"].Status != TaskBlocked {
		t.Fatalf("b = %+v, c = %+v", s.Tasks["b"], s.Tasks["c"])
	}
	if s.Status != RunPartial {
		t.Fatalf("run %s", s.Status)
	}
}

func require(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReopenLetsAPersonRetry(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run := parseRun(t, `{"title":"reopen","tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","depends":["a"]}]}`)
	s := New(run, at)
	if err := s.Reopen(); !errors.Is(err, ErrTransition) {
		t.Fatalf("reopen of a ready run: %v", err)
	}
	require(t, s.Start(at))
	require(t, s.TaskStarted("a", "", at))
	require(t, s.TaskEnded("a", Failed("boom"), 1, at))
	require(t, s.Complete(at))
	if s.Status != RunPartial || s.Summary == nil {
		t.Fatalf("run %s", s.Status)
	}
	require(t, s.Reopen())
	if s.Status != RunActive || s.Summary != nil || !s.CompletedAt.IsZero() {
		t.Fatalf("reopened: %+v", s)
	}
	require(t, s.Retry("a"))
	if got := s.Ready(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("ready after retry: %v", got)
	}
}
