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
