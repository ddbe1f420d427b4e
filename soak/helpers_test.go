package soak

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func f(v float64) *float64 { return &v }

// running is an open task's status at its attempt's plan.
func running(task string, attempt int, plan, phase string) TaskSample {
	return TaskSample{Task: task, Open: true, Stage: "running", Attempt: attempt, PlanName: plan, Phase: phase}
}

func closed(task string, attempt int, plan string) TaskSample {
	return TaskSample{Task: task, Open: false, Stage: "done", Attempt: attempt, PlanName: plan}
}

func paused(task string, attempt int, plan string, p Pause) TaskSample {
	return TaskSample{Task: task, Open: true, Stage: "paused", Attempt: attempt, PlanName: plan, Pause: &p}
}

func live(task, dir string, pgid int) LiveConductor {
	return LiveConductor{Task: task, Dir: dir, PGID: pgid}
}

func sample(s float64, cs []LiveConductor, ts ...TaskSample) Sample {
	return Sample{At: at(s), Conductors: cs, Tasks: ts}
}

// wantViolations asserts that check finds exactly the invariants listed,
// each with evidence holding every string of its row.
type want struct {
	inv      Invariant
	task     string
	evidence []string
}

func expect(t *testing.T, got []Violation, wants ...want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(wants), list(got))
	}
	for i, w := range wants {
		v := got[i]
		if v.Invariant != w.inv || v.Task != w.task {
			t.Errorf("violation %d: got %s task %q, want %s task %q\n%s", i, v.Invariant, v.Task, w.inv, w.task, v)
		}
		for _, s := range w.evidence {
			if !strings.Contains(v.Evidence, s) {
				t.Errorf("violation %d: evidence lacks %q:\n%s", i, s, v.Evidence)
			}
		}
	}
}

func list(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}
