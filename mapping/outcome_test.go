package mapping

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Plan status to task status, dispatch state and code (docs/contract.md §7.1).
func TestStatusTables(t *testing.T) {
	cases := []struct {
		ps      PlanStatus
		task    TaskStatus
		dispach DispatchState
	}{
		{PlanPending, "dispatched", "dispatching"},
		{PlanRunning, "in_progress", "dispatching"},
		{PlanBlocked, "blocked", "failed"},
		{PlanCompleted, "completed", "completed"},
		{PlanAborted, "blocked", "failed"},
		{"weird", "", ""},
		{"", "", ""},
	}
	for _, c := range cases {
		if got := TaskStatusFor(c.ps); got != c.task {
			t.Errorf("TaskStatusFor(%q) = %q, want %q", c.ps, got, c.task)
		}
		if got := DispatchStateFor(c.ps); got != c.dispach {
			t.Errorf("DispatchStateFor(%q) = %q, want %q", c.ps, got, c.dispach)
		}
	}
}

func TestLastErrorTable(t *testing.T) {
	budget := 5.0
	cases := []struct {
		name      string
		o         Outcome
		lastError string
		blocker   string
		errType   string
	}{
		{"CheckFailed", PhaseFailedOutcome(PlanBlocked, "test", 3, ErrCheckFailed, "check failed: cmd `cargo test` exited 1"),
			"Phase test failed after 3 attempts: check failed: cmd `cargo test` exited 1", "Phase test failed: cmd `cargo test` exited 1", ErrCheckFailed},
		{"CheckFailed bare message", PhaseFailedOutcome(PlanBlocked, "test", 1, ErrCheckFailed, "cmd `cargo test` exited 1"),
			"Phase test failed after 1 attempt: check failed: cmd `cargo test` exited 1", "Phase test failed: cmd `cargo test` exited 1", ErrCheckFailed},
		{"CheckFailed no message", PhaseFailedOutcome(PlanBlocked, "test", 0, ErrCheckFailed, ""),
			"Phase test failed after 1 attempt", "Phase test failed", ErrCheckFailed},
		{"AgentCrash", PhaseFailedOutcome(PlanBlocked, "implement", 2, ErrAgentCrash, "agent crashed: signal 9"),
			"Phase implement agent crashed: signal 9", "Phase implement agent crashed: signal 9", ErrAgentCrash},
		{"Timeout", PhaseFailedOutcome(PlanBlocked, "test", 1, ErrTimeout, "exceeded 600s"),
			"Phase test timed out", "Phase test timed out", ErrTimeout},
		{"BudgetExceeded", BudgetOutcome(5.234, &budget),
			"Budget exceeded ($5.23 spent of $5.00)", "Budget exceeded ($5.23 spent of $5.00)", ErrBudgetExceeded},
		{"BudgetExceeded unknown budget", BudgetOutcome(1.5, nil),
			"Budget exceeded ($1.50 spent)", "Budget exceeded ($1.50 spent)", ErrBudgetExceeded},
		{"UserAbort", AbortedOutcome(), "Plan aborted by user", "Plan aborted by user", ErrUserAbort},
		{"UserAbort via phase", PhaseFailedOutcome(PlanAborted, "test", 1, ErrUserAbort, "stop"), "Plan aborted by user", "Plan aborted by user", ErrUserAbort},
		{"other type", PhaseFailedOutcome(PlanBlocked, "review", 1, "gate_rejected", "rejected by alice"),
			"Phase review failed: rejected by alice", "Phase review failed: rejected by alice", "gate_rejected"},
		{"TimeoutOutcome", TimeoutOutcome("docs"), "Phase docs timed out", "Phase docs timed out", ErrTimeout},
		{"TimeoutOutcome no phase", TimeoutOutcome(""), "Plan timed out", "Plan timed out", ErrTimeout},
		{"CrashOutcome", CrashOutcome("test", 137, "killed"), "Phase test agent crashed: killed (exit code 137)", "Phase test agent crashed: killed (exit code 137)", ErrAgentCrash},
		{"CrashOutcome no detail", CrashOutcome("test", 2, ""), "Phase test agent crashed: exit code 2", "Phase test agent crashed: exit code 2", ErrAgentCrash},
		{"CrashOutcome conductor", CrashOutcome("", 1, "panic"), "Conductor crashed: panic (exit code 1)", "Conductor crashed: panic (exit code 1)", ErrAgentCrash},
		{"CrashOutcome nothing", CrashOutcome("", 0, " "), "Conductor crashed: no detail", "Conductor crashed: no detail", ErrAgentCrash},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.o.LastError != c.lastError {
				t.Errorf("lastError %q, want %q", c.o.LastError, c.lastError)
			}
			if c.o.BlockerReason != c.blocker {
				t.Errorf("blocker %q, want %q", c.o.BlockerReason, c.blocker)
			}
			if c.o.ErrorType != c.errType || c.o.Code != 1 {
				t.Errorf("errorType %q code %d", c.o.ErrorType, c.o.Code)
			}
			if c.o.TaskStatus != "blocked" || c.o.DispatchState != "failed" {
				t.Errorf("task %q dispatch %q", c.o.TaskStatus, c.o.DispatchState)
			}
		})
	}
}

func TestOutcomeFromEvent(t *testing.T) {
	st := threePhaseState()
	o, ok := OutcomeFromEvent(Event{Type: EventPlanCompleted}, st)
	if !ok || o != (Outcome{PlanStatus: PlanCompleted, TaskStatus: "completed", DispatchState: "completed", Code: 0}) {
		t.Errorf("completed: %+v %v", o, ok)
	}
	o, ok = OutcomeFromEvent(Event{Type: EventPlanAborted}, st)
	if !ok || o != AbortedOutcome() || o.PlanStatus != PlanAborted || o.TaskStatus != "blocked" || o.DispatchState != "failed" || o.Code != 1 {
		t.Errorf("aborted: %+v %v", o, ok)
	}
	for _, typ := range []string{EventPlanStart, EventPhaseStart, EventPhasePassed, EventPhaseFailed, EventPhaseSkipped, "gate_entered", ""} {
		if _, ok := OutcomeFromEvent(Event{Type: typ}, st); ok {
			t.Errorf("%q decided an outcome", typ)
		}
	}
	// plan_aborted right after a phase failed (on_fail: abort) names it.
	apply(&st, at(1, `{"type":"phase_failed","phase_id":"test","attempt":2,"error":"check failed: cmd x exited 1"}`))
	o, _ = OutcomeFromEvent(Event{Type: EventPlanAborted}, st)
	if o.LastError != "Plan aborted: Phase test failed after 2 attempts: check failed: cmd x exited 1" ||
		o.BlockerReason != "Plan aborted: Phase test failed: cmd x exited 1" || o.PlanStatus != PlanAborted || o.ErrorType != ErrCheckFailed || o.PhaseID != "test" {
		t.Errorf("abort after failure: %+v", o)
	}
	// Once the phase recovered, an abort is the user's again.
	apply(&st, at(2, `{"type":"phase_passed","phase_id":"test","attempt":3}`))
	if o, _ = OutcomeFromEvent(Event{Type: EventPlanAborted}, st); o != AbortedOutcome() {
		t.Errorf("abort after recovery: %+v", o)
	}
}

func stateJSON(status string, phases string) ConductorState {
	cs, err := ParseConductorState([]byte(`{"plan_name":"p","plan_file":"plan.yaml","plan_status":"` + status + `","total_cost_usd":1.25,"cost_measured":true,"version":7,"phases":[` + phases + `]}`))
	if err != nil {
		panic(err)
	}
	return cs
}

// Outcomes of a conductor that ended without a terminal event
// (docs/contract.md §6.3 and §7.3).
func TestOutcomeFromState(t *testing.T) {
	passed := `{"id":"implement","status":"passed","attempts":1,"checks":[]}`
	errPhase := func(status, typ, msg string, attempts int) string {
		return `{"id":"test","status":"` + status + `","attempts":` + string(rune('0'+attempts)) +
			`,"error":{"error_type":"` + typ + `","message":"` + msg + `","retryable":true,"timestamp":"2026-02-28T03:05:00Z"},"gate_redispatches":0}`
	}
	budget := 1.0
	big := 10.0
	cases := []struct {
		name              string
		cs                ConductorState
		budget            *float64
		ps                PlanStatus
		lastError, reason string
		errType           string
	}{
		{"completed", stateJSON("completed", passed), nil, PlanCompleted, "", "", ""},
		{"retries exhausted", stateJSON("blocked", passed+","+errPhase("failed", "check_failed", "cmd `cargo test` exited 1", 3)), nil,
			PlanBlocked, "Phase test failed after 3 attempts: check failed: cmd `cargo test` exited 1", "Phase test failed: cmd `cargo test` exited 1", ErrCheckFailed},
		{"agent crash", stateJSON("blocked", errPhase("failed", "agent_crash", "exit status 1", 3)), nil,
			PlanBlocked, "Phase test agent crashed: exit status 1", "Phase test agent crashed: exit status 1", ErrAgentCrash},
		{"stale phase", stateJSON("blocked", passed+`,{"id":"test","status":"stale","attempts":1}`), nil,
			PlanBlocked, "Phase test timed out", "Phase test timed out", ErrTimeout},
		{"timeout error", stateJSON("blocked", errPhase("stale", "timeout", "600s", 1)), nil,
			PlanBlocked, "Phase test timed out", "Phase test timed out", ErrTimeout},
		{"agent budget error", stateJSON("blocked", errPhase("failed", "budget_exceeded", "max budget", 1)), &budget,
			PlanBlocked, "Budget exceeded ($1.25 spent of $1.00)", "Budget exceeded ($1.25 spent of $1.00)", ErrBudgetExceeded},
		{"agent budget error, budget unknown", stateJSON("blocked", errPhase("failed", "budget_exceeded", "max budget", 1)), nil,
			PlanBlocked, "Budget exceeded ($1.25 spent)", "Budget exceeded ($1.25 spent)", ErrBudgetExceeded},
		{"plan budget exhausted, still running", stateJSON("running", passed+`,{"id":"test","status":"pending","attempts":0}`), &budget,
			PlanBlocked, "Budget exceeded ($1.25 spent of $1.00)", "Budget exceeded ($1.25 spent of $1.00)", ErrBudgetExceeded},
		{"user abort via conduct abort", stateJSON("aborted", passed), nil,
			PlanAborted, "Plan aborted by user", "Plan aborted by user", ErrUserAbort},
		{"user abort error", stateJSON("aborted", errPhase("failed", "user_abort", "abort", 1)), nil,
			PlanAborted, "Plan aborted by user", "Plan aborted by user", ErrUserAbort},
		{"on_fail abort", stateJSON("aborted", errPhase("failed", "check_failed", "x", 2)), nil,
			PlanAborted, "Phase test failed after 2 attempts: check failed: x", "Phase test failed: x", ErrCheckFailed},
		{"blocked without culprit", stateJSON("blocked", passed), &big,
			PlanBlocked, "Plan blocked", "Plan blocked", ""},
		{"exited while running", stateJSON("running", passed), &big,
			PlanBlocked, "Conductor exited before the plan finished (plan status running)", "Conductor exited before the plan finished (plan status running)", ErrConductorExit},
		{"exited while pending", stateJSON("pending", ""), nil,
			PlanBlocked, "Conductor exited before the plan finished (plan status pending)", "Conductor exited before the plan finished (plan status pending)", ErrConductorExit},
		{"unknown error type", stateJSON("blocked", errPhase("failed", "environmental", "LNK1104", 1)), nil,
			PlanBlocked, "Phase test failed: LNK1104", "Phase test failed: LNK1104", "environmental"},
		{"PascalCase error type", stateJSON("Blocked", errPhase("failed", "CheckFailed", "boom", 3)), nil,
			PlanBlocked, "Phase test failed after 3 attempts: check failed: boom", "Phase test failed: boom", ErrCheckFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := OutcomeFromState(c.cs, BriefState{}, c.budget)
			if o.PlanStatus != c.ps || o.LastError != c.lastError || o.BlockerReason != c.reason || o.ErrorType != c.errType {
				t.Errorf("got %+v\nwant status %q lastError %q reason %q type %q", o, c.ps, c.lastError, c.reason, c.errType)
			}
			if o.TaskStatus != TaskStatusFor(o.PlanStatus) || o.DispatchState != DispatchStateFor(o.PlanStatus) {
				t.Errorf("tables not applied: %+v", o)
			}
			if (o.Code == 0) != (c.ps == PlanCompleted) {
				t.Errorf("code %d for %s", o.Code, c.ps)
			}
		})
	}
}

func TestOutcomeFromStateFallsBackToEvents(t *testing.T) {
	st := threePhaseState()
	apply(&st, at(1, `{"type":"phase_failed","phase_id":"test","attempt":3,"error":"check failed: cmd y exited 2"}`))
	cs := stateJSON("blocked", `{"id":"test","status":"failed","attempts":3}`)
	o := OutcomeFromState(cs, st, nil)
	if o.LastError != "Phase test failed after 3 attempts: check failed: cmd y exited 2" || o.BlockerReason != "Phase test failed: cmd y exited 2" {
		t.Errorf("%+v", o)
	}
	// Without any error information the phase is still named.
	o = OutcomeFromState(cs, threePhaseState(), nil)
	if o.LastError != "Phase test failed" || o.PhaseID != "test" {
		t.Errorf("%+v", o)
	}
}

func TestParseConductorState(t *testing.T) {
	cs, err := ParseConductorState(mustReadFile(t, "../testdata/examples/B/state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cs.PlanStatus != PlanBlocked || len(cs.Phases) != 3 || cs.Phases[1].Error == nil || cs.Phases[1].Error.ErrorType != ErrCheckFailed || cs.Phases[1].Attempts != 3 {
		t.Errorf("%+v", cs)
	}
	bad := map[string]string{
		"empty":       "",
		"not object":  "[]",
		"not json":    "{",
		"no status":   `{"plan_name":"p","phases":[]}`,
		"status type": `{"plan_status":3}`,
		"phases type": `{"plan_status":"running","phases":{}}`,
	}
	for name, in := range bad {
		if _, err := ParseConductorState([]byte(in)); err == nil {
			t.Errorf("%s accepted", name)
		} else if !strings.HasPrefix(err.Error(), "state.json: ") {
			t.Errorf("%s: error %q lacks context", name, err)
		}
	}
	cs, err = ParseConductorState([]byte(`{"plan_status":"running","phases":[{"id":"a","status":"pending","error":null}],"new_field":{"x":1}}`))
	if err != nil || cs.Phases[0].Error != nil {
		t.Errorf("tolerant parse: %+v %v", cs, err)
	}
}

func TestOutcomeJSON(t *testing.T) {
	b, _ := json.Marshal(CompletedOutcome())
	if string(b) != `{"planStatus":"completed","taskStatus":"completed","dispatchState":"completed","code":0}` {
		t.Errorf("%s", b)
	}
}

// ExitOutcome: a conductor gone without a terminal event. Every row names
// what the brief saw, what the process and state.json left, and the words
// karvi gets.
func TestExitOutcomeTable(t *testing.T) {
	plan := PlanSummary{Name: "karvi-t5", PhaseIDs: []string{"implement", "test", "docs"}, MaxAttempts: 3}
	budget := 1.0
	withBudget := plan
	withBudget.BudgetUSD = &budget
	running := func() BriefState {
		s := NewBriefState("T5", plan)
		apply(&s, at(1, `{"type":"phase_start","phase_id":"test","attempt":1}`))
		return s
	}
	failedTwice := func(n int) BriefState {
		s := NewBriefState("T5", plan)
		apply(&s, at(1, `{"type":"phase_start","phase_id":"test","attempt":1}`))
		apply(&s, at(2, fmt.Sprintf(`{"type":"phase_failed","phase_id":"test","attempt":%d,"error":"check failed: cmd x exited 1"}`, n)))
		return s
	}
	passed := func() BriefState {
		s := running()
		apply(&s, at(2, `{"type":"phase_passed","phase_id":"test","attempt":1}`))
		return s
	}
	stale := &ConductorState{PlanStatus: PlanBlocked, Phases: []PhaseState{
		{ID: "implement", Status: PhasePassed}, {ID: "test", Status: PhaseStale, Attempts: 1}}}
	exhausted := &ConductorState{PlanStatus: PlanRunning, Phases: []PhaseState{
		{ID: "test", Status: PhaseFailed, Attempts: 3, Error: &PhaseError{ErrorType: ErrCheckFailed, Message: "cmd x exited 1"}}}}
	overBudget := &ConductorState{PlanStatus: PlanRunning, TotalCostUSD: 1.2, Phases: []PhaseState{
		{ID: "test", Status: PhaseFailed, Attempts: 1, Error: &PhaseError{ErrorType: ErrBudgetExceeded, Message: "spent"}}}}
	stillRunning := &ConductorState{PlanStatus: PlanRunning, Phases: []PhaseState{{ID: "test", Status: PhaseRunning}}}

	cases := []struct {
		name    string
		exit    ConductorExit
		brief   BriefState
		plan    PlanSummary
		errType string
		want    string // lastError
	}{
		{"timeout: state.json says stale", ConductorExit{State: stale}, running(), plan,
			ErrTimeout, "Phase test timed out"},
		{"retries exhausted, exit 0, plan left running", ConductorExit{State: exhausted}, failedTwice(3), plan,
			ErrCheckFailed, "Phase test failed after 3 attempts: check failed: cmd x exited 1"},
		{"budget", ConductorExit{State: overBudget}, running(), withBudget,
			ErrBudgetExceeded, "Budget exceeded ($1.20 spent of $1.00)"},
		{"crash with state that explains nothing", ConductorExit{ExitCode: 2, State: stillRunning, Stderr: "panic: boom", Output: "▶ [2/3] Phase \"test\""}, running(), plan,
			ErrAgentCrash, "Conductor crashed: conductor exited while phase test was running, leaving the plan running; stderr: panic: boom (exit code 2)"},
		{"crash with nothing on stderr: its last human output", ConductorExit{ExitCode: 2, State: stillRunning, Output: "[conductor] giving up"}, running(), plan,
			ErrAgentCrash, "Conductor crashed: conductor exited while phase test was running, leaving the plan running; last output: [conductor] giving up (exit code 2)"},
		{"killed: its progress lines are not a cause", ConductorExit{ExitCode: 137, State: stillRunning, Output: "▶ [2/3] Phase \"test\""}, running(), plan,
			ErrAgentCrash, "Conductor crashed: conductor was killed by signal 9 while phase test was running, leaving the plan running"},
		{"killed after saying something on stderr", ConductorExit{ExitCode: -1, State: stillRunning, Stderr: "warning: low memory", Output: "▶ x"}, running(), plan,
			ErrAgentCrash, "Conductor crashed: conductor was killed (no exit status was recorded) while phase test was running, leaving the plan running; stderr: warning: low memory"},
		{"exit 0 with state that explains nothing", ConductorExit{State: stillRunning}, passed(), plan,
			ErrConductorExit, "Conductor stopped without finishing the plan: conductor exited after phase test ended, leaving the plan running"},
		{"killed, no exit status, no state", ConductorExit{ExitCode: -1, StateError: "state.json missing"}, running(), plan,
			ErrAgentCrash, "Conductor crashed: conductor was killed (no exit status was recorded) while phase test was running and left no readable state.json (state.json missing)"},
		{"killed by signal 9 before any phase", ConductorExit{ExitCode: 137, StateError: "state.json missing"}, NewBriefState("T5", plan), plan,
			ErrAgentCrash, "Conductor crashed: conductor was killed by signal 9 before any phase started and left no readable state.json (state.json missing)"},
		{"no state.json, but the log shows the last attempt failed", ConductorExit{StateError: "state.json missing"}, failedTwice(3), plan,
			ErrCheckFailed, "Phase test failed after 3 attempts: check failed: cmd x exited 1"},
		{"no state.json, attempts left: not a phase failure", ConductorExit{StateError: "state.json missing"}, failedTwice(2), plan,
			ErrConductorExit, "Conductor stopped without finishing the plan: conductor exited after phase test failed and left no readable state.json (state.json missing)"},
		// A stop the runtime made of its own accord says so, whatever the
		// conductor left: a killed one's state explains nothing, and one
		// that stopped gracefully failed its phase on the way out.
		{"stopped by the worker's fence", ConductorExit{ExitCode: 143, State: stillRunning,
			Stopped: &RuntimeStop{By: StopBySweep, Host: "h2", Why: "the task's workflow runs this attempt on host h1"}}, running(), plan,
			ErrFenced, "The worker's fence on host h2 stopped the conductor while phase test was running: the task's workflow runs this attempt on host h1"},
		{"stopped by the fence, its phase failed on the way out", ConductorExit{State: &ConductorState{PlanStatus: PlanRunning, Phases: []PhaseState{
			{ID: "test", Status: PhaseFailed, Attempts: 3, Error: &PhaseError{ErrorType: ErrAgentCrash, Message: "conductor shutdown"}}}},
			Stopped: &RuntimeStop{By: StopBySweep, Host: "h1", Why: "the task's workflow is at attempt 2 (plan karvi-t5-r2)"}}, running(), plan,
			ErrFenced, "The worker's fence on host h1 stopped the conductor while phase test was running: the task's workflow is at attempt 2 (plan karvi-t5-r2)"},
		{"stopped by the start of another attempt", ConductorExit{ExitCode: -1, StateError: "state.json missing",
			Stopped: &RuntimeStop{By: StopByStart, Host: "h1", Why: "attempt karvi-t5-r2 of the task starts on this host"}}, passed(), plan,
			ErrFenced, "The start of another attempt on host h1 stopped the conductor after phase test ended: attempt karvi-t5-r2 of the task starts on this host"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ExitOutcome(c.exit, c.brief, c.plan)
			if o.TaskStatus != TaskBlocked || o.DispatchState != DispatchFailed {
				t.Errorf("status %s/%s, want blocked/failed", o.TaskStatus, o.DispatchState)
			}
			if o.ErrorType != c.errType {
				t.Errorf("error type %q, want %q", o.ErrorType, c.errType)
			}
			if o.LastError != c.want {
				t.Errorf("lastError\n got %q\nwant %q", o.LastError, c.want)
			}
		})
	}
}

// A plan that completed before the runtime's stop landed is completed.
func TestExitOutcomeOfAStoppedConductorWhosePlanCompleted(t *testing.T) {
	plan := PlanSummary{Name: "karvi-t5", PhaseIDs: []string{"implement"}, MaxAttempts: 3}
	o := ExitOutcome(ConductorExit{ExitCode: 143, State: &ConductorState{PlanStatus: PlanCompleted},
		Stopped: &RuntimeStop{By: StopBySweep, Host: "h1", Why: "x"}}, NewBriefState("T5", plan), plan)
	if o.TaskStatus != TaskCompleted {
		t.Errorf("outcome %+v, want completed", o)
	}
}

func TestDescribeExit(t *testing.T) {
	cases := []struct {
		code int
		how  string
		left int
	}{
		{0, "exited", 0},
		{1, "exited", 1},
		{128, "exited", 128},
		{-1, "was killed (no exit status was recorded)", 0},
		{137, "was killed by signal 9", 0},
		{143, "was killed by signal 15", 0},
		{255, "exited", 255},
	}
	for _, c := range cases {
		how, left := DescribeExit(c.code)
		if how != c.how || left != c.left {
			t.Errorf("DescribeExit(%d) = %q, %d; want %q, %d", c.code, how, left, c.how, c.left)
		}
	}
}

// A stall's abort is an abort: the task ends aborted, and its reason says
// which phase stalled and for how long.
func TestStallAbortedOutcome(t *testing.T) {
	o := StallAbortedOutcome("implement", "5s")
	if o.PlanStatus != PlanAborted || o.TaskStatus != TaskBlocked || o.ErrorType != ErrUserAbort || o.PhaseID != "implement" {
		t.Errorf("outcome %+v", o)
	}
	want := "Plan aborted on a stall: phase implement showed no progress (no event and no agent output) for 5s"
	if o.LastError != want || o.BlockerReason != want {
		t.Errorf("reason %q, want %q", o.LastError, want)
	}
	if !IsAbort(o.LastError) || !IsAbort(MsgUserAbort) || IsAbort("Plan aborted: Phase x failed") {
		t.Error("IsAbort tells a stall's and a person's abort from a failure's")
	}
}

// An attempt the board cancelled (or deleted) before it started ends as an
// abort does, its reason saying it was not run and why.
func TestNotRunOutcome(t *testing.T) {
	o := NotRunOutcome("the task was cancelled on the board before it started")
	if o.PlanStatus != PlanAborted || o.TaskStatus != TaskBlocked || o.DispatchState != DispatchFailed ||
		o.Code != 1 || o.ErrorType != ErrNotRun || o.PhaseID != "" {
		t.Errorf("outcome %+v", o)
	}
	want := "Plan not run: the task was cancelled on the board before it started"
	if o.LastError != want || o.BlockerReason != want {
		t.Errorf("reason %q, want %q", o.LastError, want)
	}
	if !IsAbort(o.LastError) || !IsNotRun(o.LastError) || !IsNotRun(NotRunOutcome("").LastError) {
		t.Error("a task not run is an abort")
	}
	if IsNotRun(MsgUserAbort) || IsNotRun("Plan not running") {
		t.Error("IsNotRun takes another reason for a task not run")
	}
}

// edda never clears a phase's error: a retry that passes, a retry under
// way, a phase skipped under on_fail: skip and a phase waiting for its
// next try all keep the error of the try that failed. Only a failed or
// stale phase's error says why the plan stopped; a conductor that died
// while another phase ran crashed, and the outcome says so.
func TestExitOutcomeIgnoresErrorsOfEarlierTries(t *testing.T) {
	plan := PlanSummary{Name: "karvi-s002", PhaseIDs: []string{"implement", "test", "docs"}, MaxAttempts: 3}
	// state.json as edda writes it (and cmd/eddasim after it).
	phase := func(id, status string, attempts int, errMsg string, extra string) string {
		s := fmt.Sprintf(`{"id":%q,"status":%q,"started_at":"2026-02-28T03:00:01Z","attempts":%d,"checks":[]`, id, status, attempts)
		if errMsg != "" {
			s += fmt.Sprintf(`,"error":{"error_type":"check_failed","message":%q,"retryable":true,"check_index":0,"timestamp":"2026-02-28T03:01:00Z"}`, errMsg)
		}
		return s + extra + "}"
	}
	state := func(phases ...string) *ConductorState {
		cs, err := ParseConductorState([]byte(`{"plan_name":"karvi-s002","plan_file":"plan.yaml","plan_status":"running",` +
			`"started_at":"2026-02-28T03:00:00Z","total_cost_usd":0.4,"cost_measured":true,"phases":[` +
			strings.Join(phases, ",") + `],"version":12}`))
		if err != nil {
			t.Fatal(err)
		}
		return &cs
	}
	const try1 = "exit 1: eddasim: simulated check failure (attempt 1)"
	// The events the brief saw: implement passed, docs failed its first
	// try and passed its second, then each row's own.
	brief := func(more ...string) BriefState {
		s := NewBriefState("S002", plan)
		lines := append([]string{
			`{"type":"phase_start","phase_id":"implement","attempt":1}`,
			`{"type":"phase_passed","phase_id":"implement","attempt":1}`,
			`{"type":"phase_start","phase_id":"docs","attempt":1}`,
			`{"type":"phase_failed","phase_id":"docs","attempt":1,"error":"` + try1 + `"}`,
			`{"type":"phase_start","phase_id":"docs","attempt":2}`,
			`{"type":"phase_passed","phase_id":"docs","attempt":2}`,
		}, more...)
		for i, l := range lines {
			apply(&s, at(int64(i), l))
		}
		return s
	}
	implement := phase("implement", "passed", 1, "", "")
	docsPassedOnRetry := phase("docs", "passed", 2, try1, "")
	testStarted := `{"type":"phase_start","phase_id":"test","attempt":1}`

	cases := []struct {
		name    string
		exit    ConductorExit
		brief   BriefState
		errType string
		want    string // lastError and blocker reason
		phaseID string
	}{
		{"passed on its second try, the next phase running, no exit status",
			ConductorExit{ExitCode: -1, State: state(implement, docsPassedOnRetry, phase("test", "running", 1, "", ""))},
			brief(testStarted), ErrAgentCrash,
			"Conductor crashed: conductor was killed (no exit status was recorded) while phase test was running, leaving the plan running", ""},
		{"passed on its second try, the next phase running, exit 1",
			ConductorExit{ExitCode: 1, Stderr: "panic: boom", State: state(implement, docsPassedOnRetry, phase("test", "running", 1, "", ""))},
			brief(testStarted), ErrAgentCrash,
			"Conductor crashed: conductor exited while phase test was running, leaving the plan running; stderr: panic: boom (exit code 1)", ""},
		{"the running phase's own first try failed",
			ConductorExit{ExitCode: 137, State: state(implement, docsPassedOnRetry, phase("test", "running", 2, try1, ""))},
			brief(testStarted,
				`{"type":"phase_failed","phase_id":"test","attempt":1,"error":"`+try1+`"}`,
				`{"type":"phase_start","phase_id":"test","attempt":2}`), ErrAgentCrash,
			"Conductor crashed: conductor was killed by signal 9 while phase test was running, leaving the plan running", ""},
		{"a phase skipped under on_fail: skip keeps its error",
			ConductorExit{ExitCode: -1, State: state(implement,
				phase("docs", "skipped", 1, try1, `,"skip_reason":"auto-skipped by on_fail policy"`),
				phase("test", "running", 1, "", ""))},
			brief(testStarted), ErrAgentCrash,
			"Conductor crashed: conductor was killed (no exit status was recorded) while phase test was running, leaving the plan running", ""},
		{"killed between two tries of a phase",
			ConductorExit{ExitCode: 137, State: state(implement, docsPassedOnRetry, phase("test", "pending", 1, try1, ""))},
			brief(testStarted, `{"type":"phase_failed","phase_id":"test","attempt":1,"error":"`+try1+`"}`), ErrAgentCrash,
			"Conductor crashed: conductor was killed by signal 9 after phase test failed, leaving the plan running", ""},
		{"a later phase that failed for good is still the one blamed",
			ConductorExit{State: state(implement, docsPassedOnRetry, phase("test", "failed", 3, "cmd `cargo test` exited 1", ""))},
			brief(testStarted, `{"type":"phase_failed","phase_id":"test","attempt":3,"error":"check failed: cmd `+"`cargo test`"+` exited 1"}`), ErrCheckFailed,
			"Phase test failed after 3 attempts: check failed: cmd `cargo test` exited 1", "test"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ExitOutcome(c.exit, c.brief, plan)
			if o.TaskStatus != TaskBlocked || o.DispatchState != DispatchFailed || o.Code != 1 {
				t.Errorf("status %s/%s code %d, want blocked/failed 1", o.TaskStatus, o.DispatchState, o.Code)
			}
			if o.ErrorType != c.errType || o.PhaseID != c.phaseID {
				t.Errorf("error type %q phase %q, want %q %q", o.ErrorType, o.PhaseID, c.errType, c.phaseID)
			}
			if o.LastError != c.want {
				t.Errorf("lastError\n got %q\nwant %q", o.LastError, c.want)
			}
			if c.errType != ErrCheckFailed && o.BlockerReason != c.want {
				t.Errorf("blocker\n got %q\nwant %q", o.BlockerReason, c.want)
			}
		})
	}
}

// Workflows recorded before the rule above replay with the rule they ran:
// the first phase carrying an error, whatever its status.
func TestExitOutcomeBlamingEarlierTries(t *testing.T) {
	plan := PlanSummary{Name: "karvi-s002", PhaseIDs: []string{"implement", "test", "docs"}, MaxAttempts: 3}
	x := ConductorExit{ExitCode: -1, State: &ConductorState{PlanStatus: PlanRunning, Phases: []PhaseState{
		{ID: "implement", Status: PhasePassed, Attempts: 1},
		{ID: "docs", Status: PhasePassed, Attempts: 2, Error: &PhaseError{ErrorType: ErrCheckFailed, Message: "exit 1: boom"}},
		{ID: "test", Status: PhaseRunning, Attempts: 1}}}}
	st := NewBriefState("S002", plan)
	apply(&st, at(0, `{"type":"phase_start","phase_id":"test","attempt":1}`))
	old := ExitOutcomeBlamingEarlierTries(x, st, plan)
	if old.LastError != "Phase docs failed after 2 attempts: check failed: exit 1: boom" || old.PhaseID != "docs" {
		t.Errorf("earlier rule: %+v", old)
	}
	if now := ExitOutcome(x, st, plan); now.ErrorType != ErrAgentCrash || now == old {
		t.Errorf("current rule: %+v", now)
	}
}
