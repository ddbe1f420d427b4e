package soak

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestNewMixSameSeedSameMix(t *testing.T) {
	a := NewMix(42, 3*time.Minute, 60)
	b := NewMix(42, 3*time.Minute, 60)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two mixes of seed 42 differ")
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(NewMix(43, 3*time.Minute, 60))
	if string(ja) == string(jb) {
		t.Fatal("seeds 42 and 43 gave the same mix")
	}
}

func TestDirectives(t *testing.T) {
	for _, tc := range []struct {
		spec TaskSpec
		want string
	}{
		{TaskSpec{Phases: []PhaseSpec{{ID: "implement", Delay: time.Second, Cost: 0.1}}},
			"[sim checks=pass] [sim phase=implement delay=1s cost=0.10]"},
		{TaskSpec{Phases: []PhaseSpec{
			{ID: "implement", Delay: 1500 * time.Millisecond, Cost: 0.05, Fail: 1},
			{ID: "docs", Delay: 2 * time.Second, Cost: 0.2, Limit: 7 * time.Second},
			{ID: "test", Delay: time.Second, Cost: 0.25, Stall: 5 * time.Second, Die: true},
		}},
			"[sim checks=pass] [sim phase=implement delay=1.5s cost=0.05 fail=1] [sim phase=docs delay=2s cost=0.20 limit resets=7s] [sim phase=test delay=1s cost=0.25 stall=5s die=1]"},
	} {
		if got := tc.spec.Directives(); got != tc.want {
			t.Errorf("Directives() =\n  %s\nwant\n  %s", got, tc.want)
		}
	}
}

func TestWorkAndCost(t *testing.T) {
	s := TaskSpec{Phases: []PhaseSpec{
		{ID: "implement", Delay: time.Second, Cost: 0.10, Fail: 1},
		{ID: "docs", Delay: 2 * time.Second, Cost: 0.20, Stall: 3 * time.Second},
	}}
	if got, want := s.Work(), 7*time.Second; got != want {
		t.Errorf("Work() = %s, want %s (two tries of 1s, 2s, a 3s stall)", got, want)
	}
	if got, want := s.Cost(), 0.40; fmt.Sprintf("%.2f", got) != fmt.Sprintf("%.2f", want) {
		t.Errorf("Cost() = %.2f, want %.2f (two tries of 0.10, one of 0.20)", got, want)
	}
}

// TestEveryKindAppears: over a few seeds of a CI-sized soak, every kind
// of step and every fault the mix knows is drawn at least once, and the
// kinds every soak must have are in each.
func TestEveryKindAppears(t *testing.T) {
	must := []StepKind{StepStartTask, StepStartRun, StepBoardTask, StepKillWorker, StepRestartWorker,
		StepKarvi429, StepKarviConflict, StepKarviRestart, StepServerRestart, StepPoolLimit, StepAccountResume}
	seen := map[string]bool{}
	for seed := range int64(20) {
		m := NewMix(seed, 3*time.Minute, 60)
		c := m.Counts()
		for _, k := range must {
			if c[string(k)] == 0 {
				t.Errorf("seed %d: no %s step", seed, k)
			}
		}
		if c[string(StepKillWorker)] < 2 {
			t.Errorf("seed %d: %d kills, want several", seed, c[string(StepKillWorker)])
		}
		for k := range c {
			seen[k] = true
		}
		for _, s := range m.Steps {
			var specs []TaskSpec
			if s.Spec != nil {
				specs = append(specs, *s.Spec)
			}
			if s.RunSpec != nil {
				if s.RunSpec.Budget != nil {
					seen["run-budget-"+s.RunSpec.Budget.Action] = true
				}
				if s.RunSpec.Pool != "" {
					seen["run-pool"] = true
				}
				for _, rt := range s.RunSpec.Tasks {
					specs = append(specs, rt.Spec)
					if len(rt.Depends) > 0 {
						seen["depends"] = true
					}
				}
			}
			for _, sp := range specs {
				if sp.Budget != nil {
					seen["budget-"+sp.Budget.Action] = true
				}
				if sp.Pool != "" {
					seen["pool"] = true
				}
				if sp.Account != "" {
					seen["account"] = true
				} else if sp.Pool == "" {
					seen["default-account"] = true
				}
				if sp.OnStall != "" {
					seen["stall-"+sp.OnStall] = true
				}
				for _, p := range sp.Phases {
					switch {
					case p.Limit >= time.Minute:
						seen["limit-far"] = true
					case p.Limit > 0:
						seen["limit-near"] = true
					}
					if p.Fail > 0 {
						seen["fail"] = true
					}
					if p.Die {
						seen["die"] = true
					}
				}
			}
		}
	}
	for _, k := range []string{"board_reuse", "abort", "redispatch", "resume", "budget_raise", "run_budget_raise", "board_cancel", "board_send_back",
		"budget-block", "budget-warn", "budget-pause", "run-budget-pause", "pool", "run-pool", "account", "default-account",
		"stall-warn", "stall-redispatch", "stall-abort", "limit-near", "limit-far", "fail", "die", "depends"} {
		if !seen[k] {
			t.Errorf("no seed of 20 drew %s", k)
		}
	}
}

// checkMix holds what every mix must satisfy, whatever its arguments.
func checkMix(t *testing.T, m Mix) {
	t.Helper()
	started := map[string]time.Duration{}
	var prev time.Duration
	kills, restarts := 0, 0
	for i, s := range m.Steps {
		if s.At < 0 || s.At > m.Duration {
			t.Fatalf("step %d (%s) at %s: outside the soak's %s", i, s.Kind, s.At, m.Duration)
		}
		if s.At < prev {
			t.Fatalf("step %d (%s) at %s comes after one at %s", i, s.Kind, s.At, prev)
		}
		prev = s.At
		var specs []TaskSpec
		switch s.Kind {
		case StepStartTask, StepBoardTask:
			if s.Spec == nil || s.Spec.ID != s.Task {
				t.Fatalf("step %d: %s without its spec", i, s.Kind)
			}
			specs = append(specs, *s.Spec)
		case StepStartRun:
			for _, rt := range s.RunSpec.Tasks {
				for _, dep := range rt.Depends {
					if _, ok := started[dep]; !ok {
						t.Fatalf("run %s: task %s waits for %s, not an earlier task of the run", s.Run, rt.Spec.ID, dep)
					}
				}
				specs = append(specs, rt.Spec)
				started[rt.Spec.ID] = s.At
			}
		case StepKillWorker:
			kills++
			if kills != restarts+1 {
				t.Fatalf("step %d: a kill while the host is already down", i)
			}
		case StepRestartWorker:
			restarts++
			if restarts != kills {
				t.Fatalf("step %d: a restart of a host that was not killed", i)
			}
		}
		for _, sp := range specs {
			if _, dup := started[sp.ID]; dup && s.Kind != StepStartRun {
				t.Fatalf("task id %s used twice", sp.ID)
			}
			started[sp.ID] = s.At
			if len(sp.Phases) != len(Phases) {
				t.Fatalf("task %s has %d phases, the template %d", sp.ID, len(sp.Phases), len(Phases))
			}
			for j, p := range sp.Phases {
				if p.ID != Phases[j] || p.Delay < time.Second || p.Cost <= 0 {
					t.Fatalf("task %s phase %d: %+v", sp.ID, j, p)
				}
				if p.Limit > 0 && p.Limit < time.Second {
					t.Fatalf("task %s: a limit of %s", sp.ID, p.Limit)
				}
			}
			if sp.StallAfterSec > 0 && sp.StallAfterSec >= 600 {
				t.Fatalf("task %s: stall threshold %ds not under the plan's timeout", sp.ID, sp.StallAfterSec)
			}
			if sp.Budget != nil && sp.Budget.LimitUSD <= 0 {
				t.Fatalf("task %s: budget %+v", sp.ID, sp.Budget)
			}
			for _, p := range sp.Phases {
				if sp.Budget != nil && sp.Budget.Action == "block" && p.Delay < blockPhase {
					t.Fatalf("task %s: a %s phase under a blocking budget", sp.ID, p.Delay)
				}
			}
		}
	}
	if kills != restarts {
		t.Fatalf("%d kills, %d restarts: a host left down", kills, restarts)
	}
	// Every step about a task comes at or after its start, and a budget
	// that pauses is always raised once late in the soak.
	lateRaise := map[string]bool{}
	for _, s := range m.Steps {
		switch s.Kind {
		case StepAbort, StepRedispatch, StepResume, StepBudgetRaise, StepBoardCancel, StepBoardSendBack, StepBoardReuse:
			at, ok := started[s.Task]
			if !ok {
				t.Fatalf("%s of %s: no such task in the mix", s.Kind, s.Task)
			}
			if s.At < at {
				t.Fatalf("%s of %s at %s, before its start at %s", s.Kind, s.Task, s.At, at)
			}
			if s.Kind == StepBoardReuse && (s.Spec == nil || s.Spec.ID != s.Task) {
				t.Fatalf("reuse of %s without a spec of that id", s.Task)
			}
			if s.Kind == StepBudgetRaise && s.At >= m.Duration*8/10 {
				lateRaise[s.Task] = true
			}
		}
	}
	for _, s := range m.Steps {
		if s.Spec != nil && s.Spec.Budget != nil && s.Spec.Budget.Action == "pause" && !lateRaise[s.Spec.ID] {
			t.Fatalf("task %s pauses for its budget and is never raised late", s.Spec.ID)
		}
	}
}

func TestNewMixHolds(t *testing.T) {
	for _, tc := range []struct {
		d     time.Duration
		scale float64
	}{{3 * time.Minute, 60}, {10 * time.Minute, 60}, {time.Hour, 30}, {time.Minute, 1}, {2 * time.Minute, 3600}} {
		for seed := range int64(10) {
			m := NewMix(seed, tc.d, tc.scale)
			t.Run(fmt.Sprintf("%s-x%g-seed%d", tc.d, tc.scale, seed), func(t *testing.T) { checkMix(t, m) })
		}
	}
}

// TestFarResetsEndInTime: a far reset is drawn only when its pause ends
// well within the soak, so that what it paused can still end.
func TestFarResetsEndInTime(t *testing.T) {
	for seed := range int64(30) {
		m := NewMix(seed, 3*time.Minute, 60)
		for _, s := range m.Steps {
			if s.Kind != StepStartTask || s.Spec == nil {
				continue
			}
			for _, p := range s.Spec.Phases {
				if p.Limit > 30*time.Second && s.At+p.Limit > m.Duration*85/100 {
					t.Errorf("seed %d task %s: a reset of %s from %s ends after 85%% of %s", seed, s.Task, p.Limit, s.At, m.Duration)
				}
			}
		}
	}
}

func FuzzNewMix(f *testing.F) {
	f.Add(int64(1), int64(3*time.Minute), 60.0)
	f.Add(int64(-7), int64(time.Hour), 1.0)
	f.Add(int64(99), int64(time.Second), 0.5)
	f.Fuzz(func(t *testing.T, seed, d int64, scale float64) {
		dur := time.Duration(d)
		if dur > 3*time.Hour || dur < 0 {
			dur = time.Duration(uint64(d) % uint64(3*time.Hour))
		}
		if scale > 3600 || scale < -1 {
			scale = 60
		}
		m := NewMix(seed, dur, scale)
		checkMix(t, m)
	})
}
