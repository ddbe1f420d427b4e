package soak

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// bytesSource hands out small choices from fuzz input, zeros once spent.
type bytesSource struct {
	b []byte
	i int
}

func (s *bytesSource) n(k int) int {
	if s.i >= len(s.b) || k <= 0 {
		return 0
	}
	v := int(s.b[s.i]) % k
	s.i++
	return v
}

func (s *bytesSource) pick(xs ...string) string { return xs[s.n(len(xs))] }

// observation builds an Observed from fuzz input: a few tasks, their
// sampled statuses, pauses, conductors, fence stops, journal records,
// briefs, plans, job views and webhooks, all drawn from small sets so the
// checks' cases meet.
func observation(data []byte) Observed {
	s := &bytesSource{b: data}
	tasks := []string{"a", "b", "c"}
	plan := func(task string, att int) string { return fmt.Sprintf("karvi-%s-r%d-00000000", task, att) }
	dir := func(task string) string {
		d := plan(task, 1+s.n(2))
		if s.n(3) == 0 {
			d += fmt.Sprintf("-resume-%d", 1+s.n(2))
		}
		return d
	}
	stamp := func() time.Time { return at(float64(s.n(120))) }
	var o Observed
	o.Start, o.End = at(0), at(130)
	for k := s.n(40); k > 0; k-- {
		sm := Sample{At: at(float64(len(o.Samples)) * float64(1+s.n(4)))}
		for c := s.n(3); c > 0; c-- {
			task := tasks[s.n(3)]
			sm.Conductors = append(sm.Conductors, LiveConductor{Task: task, Dir: dir(task), PGID: 100 + s.n(4)})
		}
		for c := s.n(3); c > 0; c-- {
			task := tasks[s.n(3)]
			att := 1 + s.n(2)
			ts := TaskSample{Task: task, Open: s.n(4) != 0, Stage: s.pick("running", "paused", "done", "start"),
				Attempt: att, PlanName: plan(task, att), Phase: s.pick("", "implement", "test")}
			if s.n(3) == 0 {
				ts.Pause = &Pause{Reason: s.pick(PauseUsageLimit, PauseBudget), Since: at(float64(s.n(4) * 10)),
					Until: at(float64(s.n(3) * 40)), ResetAt: at(float64(s.n(3) * 45))}
				if s.n(2) == 0 {
					ts.Pause.Until = time.Time{}
				}
			}
			if s.n(2) == 0 {
				ts.HasCost, ts.CostUSD = true, float64(s.n(5))/2
				ts.Budget = &Budget{LimitUSD: float64(1 + s.n(2)), Action: s.pick("block", "warn", "pause")}
			}
			sm.Tasks = append(sm.Tasks, ts)
		}
		o.Samples = append(o.Samples, sm)
	}
	for k := s.n(4); k > 0; k-- {
		task := tasks[s.n(3)]
		o.FenceStops = append(o.FenceStops, FenceStop{At: stamp(), Task: task, Plan: dir(task)})
	}
	kinds := []RecordKind{RecResume, RecBudgetRaise, RecFault, RecAbort, RecTaskStart, RecSendBack, RecCancel}
	for k := s.n(6); k > 0; k-- {
		o.Journal = append(o.Journal, Record{At: stamp(), Kind: kinds[s.n(len(kinds))], Task: tasks[s.n(3)]})
	}
	for _, task := range tasks {
		if s.n(4) == 0 {
			continue
		}
		t := TaskObs{ID: task}
		att := 1 + s.n(2)
		if s.n(5) != 0 {
			t.Workflow = &WorkflowObs{Closed: s.n(4) != 0, Closes: s.n(3), Outcome: s.pick("completed", "blocked", ""),
				OutcomeError: s.pick("", "agent crashed: conductor shutdown", "check failed"), Attempt: att, PlanName: plan(task, att),
				CostUSD: float64(s.n(6)) / 2}
			if s.n(2) == 0 {
				t.Workflow.Budget = &Budget{LimitUSD: 1, Action: s.pick("block", "warn")}
			}
			if s.n(2) == 0 {
				t.Workflow.Attempts = []AttemptSummary{{Attempt: 1, PlanName: plan(task, 1), EndedAt: stamp()}}
			}
		}
		if s.n(2) == 0 {
			t.Board = &BoardTask{Status: s.pick("completed", "blocked", "in_progress", "cancelled")}
			for h := s.n(4); h > 0; h-- {
				t.Board.History = append(t.Board.History, StatusChange{At: stamp(), Status: s.pick("in_progress", "blocked", "completed")})
			}
		}
		if s.n(2) == 0 {
			t.Run = "r"
			t.RunStatus = &RunTaskStatus{Status: s.pick("done", "failed", "running", "blocked")}
		}
		var events []Event
		var log []LogEntry
		for e := s.n(6); e > 0; e-- {
			ev := Event{Line: len(events) + 1, Type: s.pick("phase_start", "phase_passed", "plan_aborted"), Phase: s.pick("", "implement"), Time: fmt.Sprint(e)}
			events = append(events, ev)
			if ev.Type != "plan_aborted" && s.n(5) != 0 {
				log = append(log, LogEntry{Time: ev.Time, Agent: "conductor", Action: ev.Type, Detail: ev.Phase})
			}
		}
		if s.n(3) != 0 {
			t.Plans = append(t.Plans, PlanObs{Name: plan(task, att), Events: events, State: &PlanState{TotalCostUSD: float64(s.n(4)) / 2}})
		}
		if s.n(3) != 0 {
			t.Brief = &Brief{PlanName: plan(task, att), Log: log, TotalUSD: f(float64(s.n(4)) / 2),
				Phases: map[string]string{"implement": s.pick("passed", "running", "failed")}, ByPhase: map[string]float64{"implement": float64(s.n(3)) / 2}}
		}
		if s.n(3) != 0 {
			t.Job = &JobObs{Attempts: []string{plan(task, att)}, Steps: []JobStep{{Phase: "implement", Tries: 1 + s.n(3), CostUSD: float64(s.n(4)) / 2}}}
		}
		o.Tasks = append(o.Tasks, t)
	}
	for k := s.n(5); k > 0; k-- {
		o.Webhooks = append(o.Webhooks, Webhook{At: stamp(), ID: s.pick("x-1", "x-2"), Kind: "paused", Task: tasks[s.n(3)], Digest: s.pick("d1", "d2")})
	}
	for k := s.n(2); k > 0; k-- {
		o.Leftovers = append(o.Leftovers, Process{PID: 1000 + s.n(9), What: s.pick("conductor", "worker")})
	}
	return o
}

func FuzzChecks(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("the soak lives through hours in minutes"))
	f.Add([]byte{39, 2, 1, 0, 0, 1, 1, 0, 2, 0, 0, 3, 1, 0, 0, 1, 2, 1, 1, 1, 0, 2, 1, 0, 0, 1, 1, 3, 2, 4, 1, 0, 2, 2, 1})
	known := Invariants()
	f.Fuzz(func(t *testing.T, data []byte) {
		o := observation(data)
		all := CheckAll(&o, Config{})
		if again := CheckAll(&o, Config{}); !reflect.DeepEqual(all, again) {
			t.Fatalf("two runs over one observation differ:\n%s\n%s", list(all), list(again))
		}
		parts := append(CheckLive(&o, Config{}), CheckFinal(&o, Config{})...)
		SortViolations(parts)
		if !reflect.DeepEqual(all, parts) {
			t.Fatalf("CheckAll is not CheckLive and CheckFinal:\n%s\n%s", list(all), list(parts))
		}
		for _, v := range all {
			if !slices.Contains(known, v.Invariant) || v.Evidence == "" {
				t.Fatalf("violation without a known invariant or evidence: %+v", v)
			}
		}
		// An observation with nothing in it breaks nothing.
		if len(o.Tasks) == 0 && len(o.Samples) == 0 && len(o.FenceStops) == 0 && len(o.Webhooks) == 0 && len(o.Leftovers) == 0 && len(all) != 0 {
			t.Fatalf("an empty observation gave violations:\n%s", list(all))
		}
	})
}

func TestCheckAllReportsEveryInvariantInOrder(t *testing.T) {
	// One observation that breaks all eleven invariants: the report lists
	// them in the invariants' order.
	o := Observed{
		End: at(100),
		Samples: []Sample{
			sample(1, []LiveConductor{live("a", planA1, 10), live("a", planA1+"-resume-1", 11)},
				running("a", 1, planA1, "test"),
				TaskSample{Task: "b", Open: true, Stage: "paused", Attempt: 1, PlanName: "karvi-b-r1-1",
					Pause: &Pause{Reason: PauseUsageLimit, Since: at(0), ResetAt: at(60), Until: at(61)}},
				TaskSample{Task: "c", Open: true, Stage: "paused", Attempt: 1, PlanName: "karvi-c-r1-1",
					Pause: &Pause{Reason: PauseBudget, Since: at(0)}}),
			sample(2, []LiveConductor{live("z", "karvi-z-r1-1", 12)}, closed("z", 1, "karvi-z-r1-1"),
				running("b", 1, "karvi-b-r1-1", "test"), running("c", 1, "karvi-c-r1-1", "test")),
			sample(30, []LiveConductor{live("z", "karvi-z-r1-1", 12)}),
		},
		FenceStops: []FenceStop{{At: at(1.5), Task: "a", Plan: planA1 + "-resume-1"}},
		Tasks: []TaskObs{
			{ID: "d", Workflow: &WorkflowObs{Closed: true, Outcome: "blocked", CostUSD: 9, Budget: &Budget{LimitUSD: 1, Action: "block"},
				PlanName: "karvi-d-r1-1"},
				Brief: &Brief{PlanName: "karvi-d-r1-1", TotalUSD: f(2), Log: []LogEntry{{Agent: "conductor", Action: "phase_start"}}},
				Plans: []PlanObs{{Name: "karvi-d-r1-1", State: &PlanState{TotalCostUSD: 9}}}},
			{ID: "e"},
		},
		Webhooks:  []Webhook{{ID: "w", Digest: "1"}, {ID: "w", Digest: "2"}},
		Leftovers: []Process{{PID: 7, What: "worker"}},
	}
	got := CheckAll(&o, Config{Grace: 5 * time.Second, Stale: 5 * time.Second})
	var invs []Invariant
	for _, v := range got {
		if len(invs) == 0 || invs[len(invs)-1] != v.Invariant {
			invs = append(invs, v.Invariant)
		}
	}
	if !reflect.DeepEqual(invs, Invariants()) {
		t.Fatalf("invariants reported %v, want %v:\n%s", invs, Invariants(), list(got))
	}
}
