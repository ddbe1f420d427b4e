package soak

import (
	"testing"
	"time"
)

func TestCheckSpendWithinBlockingBudget(t *testing.T) {
	task := func(spent float64, action string, limit float64) TaskObs {
		return TaskObs{ID: "a",
			Workflow: &WorkflowObs{Closed: true, Outcome: "blocked", Attempt: 1, PlanName: planA1, CostUSD: spent,
				Budget: &Budget{LimitUSD: limit, Action: action}},
			Job: &JobObs{Attempts: []string{planA1}, Steps: []JobStep{
				{Phase: "implement", Tries: 1, CostUSD: 0.5}, {Phase: "test", Tries: 2, CostUSD: 0.3}}},
		}
	}
	// withEvents gives the task's attempt events.jsonl: implement ($0.5)
	// then test ($0.6) reach the limit of $1 at 5 s; docs ($0.9) starts
	// at docsAt.
	withEvents := func(t TaskObs, docsAt float64) TaskObs {
		ev := func(line int, s float64, typ, phase string, cost *float64) Event {
			return Event{Line: line, Type: typ, Phase: phase, Time: at(s).Format(time.RFC3339Nano), CostUSD: cost}
		}
		t.Plans = []PlanObs{{Name: planA1, State: &PlanState{TotalCostUSD: 2}, Events: []Event{
			ev(1, 1, "phase_start", "implement", nil), ev(2, 3, "phase_passed", "implement", f(0.5)),
			ev(3, 3, "phase_start", "test", nil), ev(4, 5, "phase_passed", "test", f(0.6)),
			ev(5, docsAt, "phase_start", "docs", nil), ev(6, docsAt+3, "phase_passed", "docs", f(0.9)),
			ev(7, docsAt+3, "plan_completed", "", nil)}}}
		return t
	}
	withCost := func(s TaskSample, cost, limit float64) TaskSample {
		s.HasCost, s.CostUSD, s.Budget = true, cost, &Budget{LimitUSD: limit, Action: "block"}
		return s
	}
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{name: "under its limit", o: Observed{Tasks: []TaskObs{task(0.9, "block", 1)}}},
		{name: "over by less than its costliest phase", o: Observed{Tasks: []TaskObs{task(1.45, "block", 1)}}},
		{name: "a warn budget may be passed", o: Observed{Tasks: []TaskObs{task(5, "warn", 1)}}},
		{name: "spend from state.json when the cost query had none", o: Observed{Tasks: []TaskObs{func() TaskObs {
			t := task(0, "block", 1)
			t.Plans = []PlanObs{{Name: planA1, State: &PlanState{TotalCostUSD: 2.2}}}
			return t
		}()}}, want: []want{{InvSpendWithinBlockingBudget, "a", []string{"spent $2.2", "$1.2 over"}}}},
		{name: "over by more than a phase", o: Observed{Tasks: []TaskObs{task(2, "block", 1)}},
			want: []want{{InvSpendWithinBlockingBudget, "a", []string{"spent $2 against a blocking budget of $1", "attempt 1", planA1, "$1 over", "implement, $0.5"}}}},
		{name: "stopped in the phase that reached the limit", o: Observed{Samples: []Sample{
			sample(1, nil, withCost(running("a", 1, planA1, "implement"), 0.4, 1)),
			sample(2, nil, withCost(running("a", 1, planA1, "test"), 1.1, 1)),
			sample(3, nil, withCost(running("a", 1, planA1, "test"), 1.1, 1)),
			sample(4, nil, closed("a", 1, planA1)),
		}}},
		{name: "the budget raised before the next phase", o: Observed{Samples: []Sample{
			sample(2, nil, withCost(running("a", 1, planA1, "test"), 1.1, 1)),
			sample(3, nil, withCost(running("a", 1, planA1, "docs"), 1.1, 3)),
		}}},
		{name: "a phase started past the limit", o: Observed{Samples: []Sample{
			sample(1, nil, withCost(running("a", 1, planA1, "implement"), 0.4, 1)),
			sample(2, nil, withCost(running("a", 1, planA1, "test"), 1.1, 1)),
			sample(20, nil, withCost(running("a", 1, planA1, "docs"), 1.3, 1)),
		}}, want: []want{{InvSpendWithinBlockingBudget, "a", []string{
			"at 14:00:02.000 the task had spent $1.1 of its blocking budget of $1 in phase test", "at 14:00:20.000 phase docs was running"}}}},
		// At a compressed scale a phase or two end within the real seconds
		// a stop takes: the conductor gone within the grace of the limit's
		// first sighting is the runtime stopping it in time.
		{name: "phases of a compressed scale ended while the stop took its seconds", o: Observed{
			Tasks: []TaskObs{task(2, "block", 1)},
			Samples: []Sample{
				sample(1, []LiveConductor{live("a", planA1, 10)}, withCost(running("a", 1, planA1, "implement"), 0.4, 1)),
				sample(2, []LiveConductor{live("a", planA1, 10)}, withCost(running("a", 1, planA1, "test"), 1.1, 1)),
				sample(5, []LiveConductor{live("a", planA1, 10)}, withCost(running("a", 1, planA1, "docs"), 1.8, 1)),
				sample(7, nil, closed("a", 1, planA1)),
			}}},
		{name: "the conductor ran on past the grace after the limit", o: Observed{
			Tasks: []TaskObs{task(2, "block", 1)},
			Samples: []Sample{
				sample(2, []LiveConductor{live("a", planA1, 10)}, withCost(running("a", 1, planA1, "test"), 1.1, 1)),
				sample(30, []LiveConductor{live("a", planA1, 10)}),
				sample(31, nil, closed("a", 1, planA1)),
			}}, want: []want{{InvSpendWithinBlockingBudget, "a", []string{"spent $2 against a blocking budget of $1"}}}},
		// The workflow learnt of the spend, stopped and closed between two
		// samples: the conductor's own events say when its spend reached
		// the limit, and the phase after it started within the stop's
		// grace.
		{name: "the limit reached between samples, the next phase within the grace", o: Observed{
			Tasks: []TaskObs{withEvents(task(2, "block", 1), 20)},
			Samples: []Sample{
				sample(1, []LiveConductor{live("a", planA1, 10)}, withCost(running("a", 1, planA1, "implement"), 0, 1)),
				sample(30, nil, closed("a", 1, planA1)),
			}}},
		{name: "the limit reached between samples, the next phase past the grace", o: Observed{
			Tasks: []TaskObs{withEvents(task(2, "block", 1), 25)},
			Samples: []Sample{
				sample(1, []LiveConductor{live("a", planA1, 10)}, withCost(running("a", 1, planA1, "implement"), 0, 1)),
				sample(40, nil, closed("a", 1, planA1)),
			}}, want: []want{{InvSpendWithinBlockingBudget, "a", []string{"spent $2 against a blocking budget of $1"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expect(t, CheckSpendWithinBlockingBudget(&tc.o, Config{}), tc.want...) })
	}
}

func TestCheckCostsAgree(t *testing.T) {
	// A task whose test phase passed on its second try: two tries of
	// $0.42 each.
	good := func() TaskObs {
		return TaskObs{ID: "a",
			Workflow: &WorkflowObs{Closed: true, Outcome: "completed", Attempt: 1, PlanName: planA1},
			Brief: &Brief{PlanName: planA1, TotalUSD: f(1.44),
				ByPhase: map[string]float64{"implement": 0.42, "test": 0.84, "docs": 0.18}},
			Plans: []PlanObs{{Name: planA1, State: &PlanState{Status: "completed", TotalCostUSD: 1.44}}},
			Job: &JobObs{Attempts: []string{planA1}, TotalUSD: 1.44, Steps: []JobStep{
				{Phase: "implement", Tries: 1, CostUSD: 0.42}, {Phase: "test", Tries: 2, CostUSD: 0.84}, {Phase: "docs", Tries: 1, CostUSD: 0.18}}},
		}
	}
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{name: "one attempt, all agree", o: Observed{Tasks: []TaskObs{good()}}},
		{name: "two attempts", o: Observed{Tasks: []TaskObs{func() TaskObs {
			t := good()
			t.Workflow.Attempt, t.Workflow.PlanName, t.Brief.PlanName = 2, planA2, planA2
			t.Plans = []PlanObs{{Name: planA1, State: &PlanState{TotalCostUSD: 0.5}}, {Name: planA2, State: &PlanState{TotalCostUSD: 1.44}}}
			t.Job.Attempts = []string{planA1, planA2}
			t.Job.Steps[0].CostUSD += 0.5
			return t
		}()}}},
		{
			// The first attempt's host was given up (a server restart
			// outlasted the host grace) while its conductor ran on and
			// finished: the view counts what the attempt spent until it
			// was given up, state.json what its conductor spent in all.
			name: "a host-lost attempt's conductor spent on after it was given up",
			o: Observed{Tasks: []TaskObs{func() TaskObs {
				t := good()
				t.Workflow.Attempt, t.Workflow.PlanName, t.Brief.PlanName = 2, planA2, planA2
				t.Workflow.Attempts = []AttemptSummary{{Attempt: 1, PlanName: planA1, Ended: "host-lost"}, {Attempt: 2, PlanName: planA2, Ended: "completed"}}
				t.Plans = []PlanObs{{Name: planA1, State: &PlanState{TotalCostUSD: 1.44}}, {Name: planA2, State: &PlanState{TotalCostUSD: 1.44}}}
				t.Job.Attempts = []string{planA1, planA2}
				t.Job.Steps[0].CostUSD += 0.2
				return t
			}()}},
		},
		{
			// Less than the attempts that ended by themselves spent is
			// still a cost lost, a host-lost attempt or not.
			name: "a view short of what the attempts that were not lost spent",
			o: Observed{Tasks: []TaskObs{func() TaskObs {
				t := good()
				t.Workflow.Attempt, t.Workflow.PlanName, t.Brief.PlanName = 2, planA2, planA2
				t.Workflow.Attempts = []AttemptSummary{{Attempt: 1, PlanName: planA1, Ended: "host-lost"}, {Attempt: 2, PlanName: planA2, Ended: "completed"}}
				t.Plans = []PlanObs{{Name: planA1, State: &PlanState{TotalCostUSD: 1.44}}, {Name: planA2, State: &PlanState{TotalCostUSD: 1.44}}}
				t.Job.Attempts = []string{planA1, planA2}
				t.Job.Steps[1].CostUSD = 0.42
				return t
			}()}},
			want: []want{{InvCostsAgree, "a", []string{"job view steps add up to $1.02", "state.json of its attempts adds up to $2.88"}}},
		},
		{
			// A spent blocking budget stopped the conductor, but its host
			// took no activity within the grace: the attempt ended
			// blocked with what it had delivered ($0.42 of implement),
			// its conductor ran on to the end of its plan.
			name: "a conductor left behind by the attempt's stop spent on",
			o: Observed{Tasks: []TaskObs{func() TaskObs {
				t := good()
				t.Workflow.Outcome = "blocked"
				t.Workflow.Attempts = []AttemptSummary{{Attempt: 1, PlanName: planA1, Ended: "blocked", ConductorLeft: true}}
				t.Brief.TotalUSD, t.Brief.ByPhase = f(0.42), map[string]float64{"implement": 0.42}
				t.Job.Steps = []JobStep{{Phase: "implement", Tries: 1, CostUSD: 0.42}, {Phase: "test"}, {Phase: "docs"}}
				return t
			}()}},
		},
		{
			// Without that record the same shortfall is a cost lost.
			name: "the same shortfall from an attempt that was not left",
			o: Observed{Tasks: []TaskObs{func() TaskObs {
				t := good()
				t.Workflow.Outcome = "blocked"
				t.Workflow.Attempts = []AttemptSummary{{Attempt: 1, PlanName: planA1, Ended: "blocked"}}
				t.Brief.TotalUSD, t.Brief.ByPhase = f(0.42), map[string]float64{"implement": 0.42}
				t.Job.Steps = []JobStep{{Phase: "implement", Tries: 1, CostUSD: 0.42}, {Phase: "test"}, {Phase: "docs"}}
				return t
			}()}},
			want: []want{
				{InvCostsAgree, "a", []string{"job view steps add up to $0.42", "adds up to $1.44"}},
				{InvCostsAgree, "a", []string{"the brief's cost.total_usd is $0.42", "says $1.44"}},
			},
		},
		{
			// A left conductor bounds the brief from above only: a brief
			// that says more than its conductor spent is still wrong.
			name: "a left attempt's brief above its state.json",
			o: Observed{Tasks: []TaskObs{func() TaskObs {
				t := good()
				t.Workflow.Attempts = []AttemptSummary{{Attempt: 1, PlanName: planA1, Ended: "blocked", ConductorLeft: true}}
				t.Brief.TotalUSD = f(2)
				return t
			}()}},
			want: []want{{InvCostsAgree, "a", []string{"the brief's cost.total_usd is $2"}}},
		},
		{name: "a task still running is not judged", o: Observed{Tasks: []TaskObs{func() TaskObs {
			t := good()
			t.Workflow.Closed = false
			t.Job.Steps[1].CostUSD = 9
			return t
		}()}}},
		{
			// The retried phase's spend counted once per checkpoint that
			// met it: three tries' worth for two.
			name: "a retried phase counted three times",
			o: Observed{Tasks: []TaskObs{func() TaskObs {
				t := good()
				t.Job.Steps[1].CostUSD = 1.26
				return t
			}()}},
			want: []want{
				{InvCostsAgree, "a", []string{"job view steps add up to $1.86", "test $1.26/2 tries", "state.json of its attempts adds up to $1.44", planA1 + " $1.44"}},
				{InvCostsAgree, "a", []string{"attempt plan " + planA1 + " phase test", "$1.26 over 2 tries", "cost.by_phase says $0.84"}},
			},
		},
		{name: "the brief's total lags state.json", o: Observed{Tasks: []TaskObs{func() TaskObs {
			t := good()
			t.Brief.TotalUSD = f(1.02)
			return t
		}()}}, want: []want{{InvCostsAgree, "a", []string{"cost.total_usd is $1.02", "plan " + planA1 + ") says $1.44"}}}},
		{name: "state.json missing for an attempt the view counts", o: Observed{Tasks: []TaskObs{func() TaskObs {
			t := good()
			t.Plans = nil
			return t
		}()}}, want: []want{{InvCostsAgree, "a", []string{planA1 + " none"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expect(t, CheckCostsAgree(&tc.o, Config{}), tc.want...) })
	}
}
