package runstatus

import (
	"errors"
	"testing"
	"time"
)

// A running task that pauses on a usage limit shows paused with its
// reason and time, then running again; only a running task pauses, only
// for a usage limit, and a stalled task is not resumed this way.
func TestTaskPausesOnAUsageLimitAndResumes(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(parseRun(t, testRun), at)
	if err := s.Start(at); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseTask("a", PausedUsageLimit, at); !errors.Is(err, ErrTransition) {
		t.Fatalf("pause of a queued task: %v, want ErrTransition", err)
	}
	if err := s.TaskStarted("a", "", at); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseTask("a", PausedStall, at); !errors.Is(err, ErrTransition) {
		t.Fatalf("pause for a stall: %v, want ErrTransition", err)
	}
	if err := s.PauseTask("a", PausedUsageLimit, at); err != nil {
		t.Fatal(err)
	}
	if a := s.Tasks["a"]; a.Status != TaskPaused || a.PausedReason != PausedUsageLimit || !a.PausedAt.Equal(at) {
		t.Fatalf("a = %+v", a)
	}
	if err := s.ResumeTask("a"); err != nil {
		t.Fatal(err)
	}
	if a := s.Tasks["a"]; a.Status != TaskRunning || a.PausedReason != "" || !a.PausedAt.IsZero() {
		t.Fatalf("a = %+v", a)
	}
	if err := s.ResumeTask("a"); !errors.Is(err, ErrTransition) {
		t.Fatalf("resume of a running task: %v, want ErrTransition", err)
	}
}

// A task's own budget with the action pause pauses it too.
func TestTaskPausesForItsBudget(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(parseRun(t, testRun), at)
	if err := s.Start(at); err != nil {
		t.Fatal(err)
	}
	if err := s.TaskStarted("a", "", at); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseTask("a", PausedBudget, at); err != nil {
		t.Fatal(err)
	}
	if a := s.Tasks["a"]; a.Status != TaskPaused || a.PausedReason != PausedBudget {
		t.Fatalf("a = %+v", a)
	}
}

// A run paused for its budget says so at the run's level, with the time;
// its resume clears both, and a person's pause gives no reason.
func TestRunPausesForItsBudget(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(parseRun(t, testRun), at)
	if err := s.PauseFor(PausedBudget, at); !errors.Is(err, ErrTransition) {
		t.Fatalf("pause of a run not started: %v, want ErrTransition", err)
	}
	if err := s.Start(at); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseFor(PausedBudget, at); err != nil {
		t.Fatal(err)
	}
	if s.Status != RunPaused || s.PausedReason != PausedBudget || !s.PausedAt.Equal(at) {
		t.Fatalf("run = %s %q %v", s.Status, s.PausedReason, s.PausedAt)
	}
	if r := s.Ready(); len(r) != 0 {
		t.Fatalf("a paused run starts nothing, Ready = %v", r)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if s.Status != RunActive || s.PausedReason != "" || !s.PausedAt.IsZero() {
		t.Fatalf("run = %s %q %v", s.Status, s.PausedReason, s.PausedAt)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if s.PausedReason != "" {
		t.Fatalf("a person's pause: reason %q", s.PausedReason)
	}
}
