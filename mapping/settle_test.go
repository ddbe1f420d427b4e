package mapping

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
)

// briefAfter is the example plan's brief after the given event lines.
func briefAfter(lines ...string) BriefState {
	s := threePhaseState()
	for i, l := range lines {
		if _, ok := s.Reduce(at(int64(i+1)*10, l)); !ok {
			panic("test event changed nothing: " + l)
		}
	}
	return s
}

const (
	implStart  = `{"ts":"t1","type":"phase_start","phase_id":"implement","attempt":1}`
	implPassed = `{"ts":"t2","type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":1000,"cost_usd":0.5}`
	testStart  = `{"ts":"t3","type":"phase_start","phase_id":"test","attempt":1}`
	testPassed = `{"ts":"t4","type":"phase_passed","phase_id":"test","attempt":1,"duration_ms":1000,"cost_usd":0.25}`
	testFailed = `{"ts":"t4","type":"phase_failed","phase_id":"test","attempt":1,"error":"check failed: cmd x exited 1","error_type":"check_failed"}`
	docsStart  = `{"ts":"t5","type":"phase_start","phase_id":"docs","attempt":1}`
	docsTimed  = `{"ts":"t6","type":"phase_failed","phase_id":"docs","attempt":1,"error":"timed out","error_type":"timeout"}`
)

func phases(ps ...PhaseState) *ConductorState {
	return &ConductorState{PlanName: "karvi-t5-020d01", PlanStatus: PlanRunning, Phases: ps}
}

func passedPhase(id string) PhaseState { return PhaseState{ID: id, Status: PhasePassed, Attempts: 1} }

// The settle rule, row by row: what the events left in the brief, what
// state.json says, how the attempt ended, and the one PATCH body (without
// its log) that makes the brief tell the same story; "" for no patch.
func TestSettleTable(t *testing.T) {
	crash := CrashOutcome("", 3, "conductor exited while phase test was running, leaving the plan running; stderr: boom")
	cases := []struct {
		name    string
		brief   BriefState
		state   *ConductorState
		outcome Outcome
		body    string
		detail  string // the log entry's detail
	}{
		{"edda's timeout: the brief says failed, state.json stale",
			briefAfter(implStart, implPassed, testStart, testPassed, docsStart, docsTimed),
			phases(passedPhase("implement"), passedPhase("test"),
				PhaseState{ID: "docs", Status: PhaseStale, Attempts: 1, Error: &PhaseError{ErrorType: ErrTimeout, Message: `phase "docs" timed out`}}),
			TimeoutOutcome("docs"),
			`{"phases":{"docs":{"status":"stale","error":"phase \"docs\" timed out"}}}`,
			`docs stale (was failed): phase "docs" timed out`},
		{"stale without an error, no event at all",
			briefAfter(implStart, implPassed, testStart, testPassed, docsStart),
			phases(passedPhase("implement"), passedPhase("test"), PhaseState{ID: "docs", Status: PhaseStale, Attempts: 1}),
			TimeoutOutcome("docs"),
			`{"phases":{"docs":{"status":"stale","error":"timed out"}}}`,
			`docs stale (was running): timed out`},
		{"conductor died mid-phase, state.json still running",
			briefAfter(implStart, implPassed, testStart),
			phases(passedPhase("implement"), PhaseState{ID: "test", Status: PhaseRunning, Attempts: 1}, PhaseState{ID: "docs", Status: PhasePending}),
			crash,
			`{"phases":{"test":{"status":"failed","error":"` + crash.LastError + `"}}}`,
			`test failed (was running): ` + crash.LastError},
		{"abort: no state.json read, the running phase is interrupted",
			briefAfter(implStart, implPassed, testStart),
			nil,
			AbortedOutcome(),
			`{"phases":{"test":{"status":"failed","error":"Plan aborted by user"}}}`,
			`test failed (was running): Plan aborted by user`},
		{"silence watchdog: the interrupted phase is stale",
			briefAfter(implStart),
			phases(PhaseState{ID: "implement", Status: PhaseRunning, Attempts: 1}),
			TimeoutOutcome("implement"),
			`{"phases":{"implement":{"status":"stale","error":"Phase implement timed out"}}}`,
			`implement stale (was running): Phase implement timed out`},
		{"killed after state.json said running, before the event",
			briefAfter(implStart, implPassed),
			phases(passedPhase("implement"), PhaseState{ID: "test", Status: PhaseRunning, Attempts: 2}),
			crash,
			`{"phases":{"test":{"status":"failed","attempts":2,"error":"` + crash.LastError + `"}}}`,
			`test failed (was pending): ` + crash.LastError},
		{"state.json lags the phase_passed event: the event stands",
			briefAfter(implStart, implPassed, testStart, testPassed),
			phases(passedPhase("implement"), PhaseState{ID: "test", Status: PhaseChecking, Attempts: 1}),
			crash,
			"", ""},
		{"retries exhausted: brief and state.json agree",
			briefAfter(implStart, implPassed, testStart, testFailed),
			phases(passedPhase("implement"),
				PhaseState{ID: "test", Status: PhaseFailed, Attempts: 1, Error: &PhaseError{ErrorType: ErrCheckFailed, Message: "cmd x exited 1"}},
				PhaseState{ID: "docs", Status: PhasePending}),
			PhaseFailedOutcome(PlanBlocked, "test", 1, ErrCheckFailed, "cmd x exited 1"),
			"", ""},
		{"state.json has the newer error wording",
			briefAfter(implStart, implPassed, testStart, testFailed),
			phases(passedPhase("implement"),
				PhaseState{ID: "test", Status: PhaseFailed, Attempts: 3, Error: &PhaseError{ErrorType: ErrBudgetExceeded, Message: "budget exceeded: $2 spent"}}),
			BudgetOutcome(2, nil),
			`{"phases":{"test":{"status":"failed","attempts":3,"error":"$2 spent"}}}`,
			`test failed: $2 spent`},
		{"between retries: state.json put the phase back to pending",
			briefAfter(implStart, implPassed, testStart, testFailed),
			phases(passedPhase("implement"), PhaseState{ID: "test", Status: PhasePending, Attempts: 1}),
			AbortedOutcome(),
			`{"phases":{"test":{"status":"pending"}}}`,
			`test pending (was failed)`},
		{"a phase state.json skipped counts as completed",
			briefAfter(implStart, implPassed),
			phases(passedPhase("implement"), PhaseState{ID: "test", Status: PhaseFailed, Attempts: 1},
				PhaseState{ID: "docs", Status: PhaseSkipped, SkipReason: "not needed"}),
			PhaseFailedOutcome(PlanBlocked, "test", 1, "", ""),
			`{"phases":{"test":{"status":"failed","attempts":1},"docs":{"status":"skipped","reason":"not needed"}},"completedPhases":2}`,
			`test failed (was pending); docs skipped (was pending)`},
		{"completed: nothing to settle",
			briefAfter(implStart, implPassed, testStart, testPassed, docsStart,
				`{"ts":"t6","type":"phase_passed","phase_id":"docs","attempt":1,"duration_ms":1000}`),
			nil, CompletedOutcome(), "", ""},
		{"a phase the plan does not have is ignored",
			briefAfter(implStart, implPassed),
			phases(passedPhase("implement"), PhaseState{ID: "lint", Status: PhaseFailed, Attempts: 1}),
			PhaseFailedOutcome(PlanBlocked, "lint", 1, "", ""),
			"", ""},
		{"completed, but a phase's end was lost: it passed",
			briefAfter(implStart, implPassed, testStart, docsStart,
				`{"ts":"t6","type":"phase_passed","phase_id":"docs","attempt":1,"duration_ms":1000}`),
			nil, CompletedOutcome(),
			`{"phases":{"test":{"status":"passed"}},"completedPhases":3}`,
			`test passed (was running)`},
		{"an outcome without words still ends a running phase",
			briefAfter(implStart),
			nil, Outcome{},
			`{"phases":{"implement":{"status":"failed","error":"the conductor stopped before this phase ended"}}}`,
			`implement failed (was running): the conductor stopped before this phase ended`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.brief
			before, _ := json.Marshal(s)
			ch, ok := s.Settle(c.outcome, c.state, "t9")
			if c.body == "" {
				if ok {
					var enc BriefEncoder
					t.Fatalf("settled with a patch %s", enc.Patch(&s, ch).Body)
				}
				if after, _ := json.Marshal(s); string(after) != string(before) {
					t.Fatal("a settle without a patch changed the state")
				}
				return
			}
			if !ok {
				t.Fatal("no patch")
			}
			var enc BriefEncoder
			p := enc.Patch(&s, ch)
			if p.Type != PatchTypeSettle {
				t.Errorf("patch type %q", p.Type)
			}
			if got := bodyWithoutLog(t, p); got != c.body {
				t.Errorf("body\n got %s\nwant %s", got, c.body)
			}
			last := s.Brief.Log[len(s.Brief.Log)-1]
			if want := (LogEntry{"t9", SettleAgent, PatchTypeSettle, c.detail}); last != want {
				t.Errorf("log entry\n got %+v\nwant %+v", last, want)
			}
			for _, id := range s.PhaseOrder {
				if st := s.Brief.Phases[id].Status; st == PhaseRunning || st == PhaseChecking {
					t.Errorf("phase %s still %s", id, st)
				}
			}
			if _, again := s.Settle(c.outcome, c.state, "t10"); again {
				t.Error("a second settle found more to change")
			}
		})
	}
}

// Examples A and B end with briefs that already tell the truth: settling
// them sends nothing, so their golden PATCH sequences stay as they are.
func TestSettleLeavesTheExamplesAlone(t *testing.T) {
	for _, ex := range []string{"A", "B"} {
		t.Run(ex, func(t *testing.T) {
			dir := filepath.Join(examplesDir, ex)
			d, err := ParseDispatchPlan(mustReadFile(t, filepath.Join(dir, "dispatch.json")))
			if err != nil {
				t.Fatal(err)
			}
			plan, err := BuildPlan(d, 1, DefaultTemplate())
			if err != nil {
				t.Fatal(err)
			}
			st := NewBriefState(d.TaskID, plan.Summary())
			_, events := replay(t, &st, filepath.Join(dir, "events.snake.jsonl"))
			var cs *ConductorState
			o, ok := OutcomeFromEvent(events[len(events)-1], st)
			if !ok {
				parsed, err := ParseConductorState(mustReadFile(t, filepath.Join(dir, "state.json")))
				if err != nil {
					t.Fatal(err)
				}
				cs = &parsed
				o = OutcomeFromState(parsed, st, nil)
			}
			if c, changed := st.Settle(o, cs, "t"); changed {
				t.Errorf("example %s settled with %+v", ex, c)
			}
		})
	}
}

func TestCloneSharesNothingTheReducerWrites(t *testing.T) {
	s := briefAfter(implStart, implPassed, testStart, testFailed)
	snap, _ := json.Marshal(s)
	c := s.Clone()
	if !reflect.DeepEqual(c, s) {
		t.Fatal("clone differs")
	}
	c.Reduce(at(100, `{"ts":"t5","type":"phase_start","phase_id":"test","attempt":2}`))
	c.Reduce(at(110, `{"ts":"t6","type":"phase_passed","phase_id":"test","attempt":2,"cost_usd":1}`))
	c.Settle(AbortedOutcome(), nil, "t7")
	if after, _ := json.Marshal(s); string(after) != string(snap) {
		t.Errorf("changing the clone changed the original:\n%s\n%s", snap, after)
	}
}
