package jobview

import (
	"encoding/json"
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

// The transcripts are written when an agent call ends, before its checks
// run and so before the phase's event: a checkpoint taken while a retried
// phase's second try is checking reads both tries in the transcripts (the
// failed one's cost is in no event) while the events have told neither
// cost. The passing try's event then tells its own cost, which the
// transcripts already held: the step costs the two tries, not three.
func TestTranscriptsReadBeforeTheRetriedPhasePassesAreNotAddedTo(t *testing.T) {
	tl := NewTally(Seed{PhaseIDs: []string{"implement", "test", "docs"}})
	impl, test, docs := 0.85, 0.42, 0.18
	var off int64
	observe := func(ev mapping.Event) {
		off += 100
		ev.Pos = mapping.Position{Offset: off}
		if !tl.Observe(ev) {
			t.Fatalf("event %+v not folded in", ev)
		}
	}
	// A checkpoint: the tally goes to the workflow and comes back.
	checkpoint := func(total float64, phases []StatePhase, byPhase map[string]float64) {
		tl.ObserveState(State{PlanStatus: "running", TotalCostUSD: &total, Phases: phases})
		tl.ObserveSpend(byPhase)
		data, err := json.Marshal(tl)
		if err != nil {
			t.Fatal(err)
		}
		tl = &Tally{}
		if err := json.Unmarshal(data, tl); err != nil {
			t.Fatal(err)
		}
	}
	steps := func() (map[string]float64, float64) {
		by, sum := map[string]float64{}, 0.0
		for _, s := range tl.Metrics("J", "").StepMetrics {
			by[s.StepID] = s.CostUSD
			sum += s.CostUSD
		}
		return by, sum
	}
	observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "implement", Attempt: 1})
	observe(mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "implement", Attempt: 1, CostUSD: &impl})
	observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "test", Attempt: 1})
	observe(mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "test", Attempt: 1, Error: "cmd `cargo test` exited 1"})
	observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "test", Attempt: 2})
	// The second try's agent call ended and its checks run: state.json and
	// the transcripts count both tries.
	checkpoint(impl+2*test,
		[]StatePhase{{ID: "implement", Status: "passed", Attempts: 1}, {ID: "test", Status: "checking", Attempts: 2}},
		map[string]float64{"implement": impl, "test": 2 * test})
	if by, _ := steps(); math.Abs(by["test"]-2*test) > 1e-9 {
		t.Errorf("while the second try checks: test step costs %v, want %v", by["test"], 2*test)
	}
	observe(mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "test", Attempt: 2, CostUSD: &test})
	observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "docs", Attempt: 1})
	observe(mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "docs", Attempt: 1, CostUSD: &docs})
	total := impl + 2*test + docs
	observe(mapping.Event{Type: mapping.EventPlanCompleted, TotalCostUSD: &total})
	checkpoint(total,
		[]StatePhase{{ID: "implement", Status: "passed", Attempts: 1}, {ID: "test", Status: "passed", Attempts: 2},
			{ID: "docs", Status: "passed", Attempts: 1}},
		map[string]float64{"implement": impl, "test": 2 * test, "docs": docs})
	by, sum := steps()
	if math.Abs(by["test"]-2*test) > 1e-9 {
		t.Errorf("test step costs %v, want two tries' %v: %+v", by["test"], 2*test, tl.Metrics("J", "").StepMetrics)
	}
	if math.Abs(sum-total) > 1e-9 {
		t.Errorf("steps add up to %v, want the total %v", sum, total)
	}
	if c := tl.Metrics("J", "").Cost.TotalUSD; math.Abs(c-total) > 1e-9 {
		t.Errorf("job costs %v, want %v", c, total)
	}
}

// A conductor that keeps no transcripts: a retried phase's failed try is
// only in the plan's total. Once every phase passed, that part still
// belongs to the phase that failed, so the steps add up to the job's cost.
func TestAFailedTrysCostStaysOnItsPhaseOnceThePlanPassed(t *testing.T) {
	tl := NewTally(Seed{PhaseIDs: []string{"implement", "test", "docs"}})
	impl, test, docs := 0.85, 0.42, 0.18
	var off int64
	observe := func(ev mapping.Event) {
		off += 100
		ev.Pos = mapping.Position{Offset: off}
		tl.Observe(ev)
	}
	observe(mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "implement", Attempt: 1, CostUSD: &impl})
	observe(mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "test", Attempt: 1, Error: "exit 1"})
	observe(mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "test", Attempt: 2, CostUSD: &test})
	observe(mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "docs", Attempt: 1, CostUSD: &docs})
	total := impl + 2*test + docs
	observe(mapping.Event{Type: mapping.EventPlanCompleted, TotalCostUSD: &total})
	tl.ObserveSpend(nil)
	var sum float64
	for _, s := range tl.Metrics("J", "").StepMetrics {
		sum += s.CostUSD
		if s.StepID == "test" && math.Abs(s.CostUSD-2*test) > 1e-9 {
			t.Errorf("test step costs %v, want two tries' %v", s.CostUSD, 2*test)
		}
	}
	if math.Abs(sum-total) > 1e-9 {
		t.Errorf("steps add up to %v, want the total %v", sum, total)
	}
}
