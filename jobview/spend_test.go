package jobview

import (
	"math"
	"testing"

	"karvi-edda-temporal/mapping"
)

// A phase whose checks failed three times spent three agent calls that no
// event reports: state.json's total and the transcripts' split are what
// the job view's cost and its steps' costs show, and the steps add up to
// the total.
func TestJobCostIsWhatTheConductorSpent(t *testing.T) {
	tl := NewTally(Seed{PhaseIDs: []string{"build", "test"}})
	c := 0.10
	tl.Observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "build", Attempt: 1})
	tl.Observe(mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "build", Attempt: 1, CostUSD: &c})
	for n := 1; n <= 3; n++ {
		tl.Observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "test", Attempt: n})
		tl.Observe(mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "test", Attempt: n, Error: "exit 1"})
	}
	total := 0.40
	tl.ObserveState(State{PlanStatus: "pending", TotalCostUSD: &total,
		Phases: []StatePhase{{ID: "build", Status: "passed", Attempts: 1}, {ID: "test", Status: "failed", Attempts: 3}}})
	tl.ObserveSpend(map[string]float64{"test": 0.30})

	m := tl.Metrics("J", "")
	if math.Abs(m.Cost.TotalUSD-0.40) > 1e-9 {
		t.Errorf("cost total %v, want 0.40", m.Cost.TotalUSD)
	}
	var steps float64
	for _, s := range m.StepMetrics {
		steps += s.CostUSD
	}
	if math.Abs(steps-0.40) > 1e-9 {
		t.Errorf("steps add up to %v, want 0.40: %+v", steps, m.StepMetrics)
	}
}

// state.json may be ahead of the events read so far: read while the last
// phase's events stop at its start, it already counts that phase's cost,
// which the residual puts on the phase (its try runs). The phase's own
// event then tells the same cost: the steps still add up to the total
// once the spend is read again, not to the total plus that phase twice.
func TestSpendReadAheadOfTheEventsIsNotCountedTwice(t *testing.T) {
	tl := NewTally(Seed{PhaseIDs: []string{"build", "docs"}})
	build, docs := 0.85, 0.18
	var off int64
	observe := func(ev mapping.Event) {
		off += 100
		ev.Pos = mapping.Position{Offset: off}
		if !tl.Observe(ev) {
			t.Fatalf("event %+v not folded in", ev)
		}
	}
	observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "build", Attempt: 1})
	observe(mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "build", Attempt: 1, CostUSD: &build})
	observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "docs", Attempt: 1})
	total := build + docs
	state := State{PlanStatus: "completed", TotalCostUSD: &total,
		Phases: []StatePhase{{ID: "build", Status: "passed", Attempts: 1}, {ID: "docs", Status: "passed", Attempts: 1}}}
	tl.ObserveState(state)
	tl.ObserveSpend(nil)
	steps := func() float64 {
		var sum float64
		for _, s := range tl.Metrics("J", "").StepMetrics {
			sum += s.CostUSD
		}
		return sum
	}
	if math.Abs(steps()-total) > 1e-9 {
		t.Errorf("ahead of the events: steps add up to %v, want %v", steps(), total)
	}
	observe(mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "docs", Attempt: 1, CostUSD: &docs})
	tl.ObserveState(state)
	tl.ObserveSpend(nil)
	if math.Abs(steps()-total) > 1e-9 {
		t.Errorf("after the phase's event: steps add up to %v, want %v: %+v", steps(), total, tl.Metrics("J", "").StepMetrics)
	}
}
