package canonical

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"karvi-edda-temporal/mapping"
)

func TestFromStep(t *testing.T) {
	at := time.Date(2026, 2, 28, 12, 0, 1, 123456789, time.FixedZone("KST", 9*3600))
	ctx := StepContext{RunID: RunIDForTask("T5"), TaskID: "T5",
		Source: StepSource("default", "karvi-task-T5", "0195f3c2-7a9b-7c3e-8f1a-2b3c4d5e6f70")}
	cost := 1.45
	tests := []struct {
		name    string
		step    Step
		state   State
		typ     Type
		payload string
	}{
		{"task started",
			Step{Kind: StepTaskStarted, Attempt: 1, Plan: "karvi-t5-020d01", Title: "Add user authentication with JWT."},
			StateRunning, TypeStateChange,
			`{"from":"idle","to":"running","trigger":"task_started","title":"Add user authentication with JWT.","attempt":1}`},
		{"task started again after a block",
			Step{Kind: StepTaskStarted, Prev: StateBlocked, Attempt: 2},
			StateRunning, TypeStateChange, `{"from":"blocked","to":"running","trigger":"task_started","attempt":2}`},
		{"reopened",
			Step{Kind: StepReopened, Prev: StateDone, Attempt: 2},
			StateIdle, TypeStateChange, `{"from":"done","to":"idle","trigger":"redispatch","attempt":2}`},
		{"attempt started",
			Step{Kind: StepAttemptStarted, Prev: StateRunning, Attempt: 2, Plan: "karvi-t5-020d01-r2"},
			StateRunning, TypeTaskSpawn,
			`{"title":"attempt 2: plan karvi-t5-020d01-r2","child_agent":"conductor-r2","attempt":2,"plan_name":"karvi-t5-020d01-r2"}`},
		{"dispatched",
			Step{Kind: StepTaskStatus, Prev: StateRunning, Status: "dispatched", PhasesTotal: 3},
			StateRunning, TypeTaskUpdate, `{"progress":0,"message":"task dispatched","status":"dispatched"}`},
		{"completed",
			Step{Kind: StepTaskStatus, Prev: StateRunning, Status: "completed"},
			StateDone, TypeTaskDone, `{"result":"success","summary":"task completed","status":"completed"}`},
		{"blocked",
			Step{Kind: StepTaskStatus, Prev: StateRunning, Status: "blocked", Reason: "Phase test failed: cmd `cargo test` exited 1"},
			StateBlocked, TypeTaskDone,
			"{\"result\":\"failure\",\"summary\":\"Phase test failed: cmd `cargo test` exited 1\",\"status\":\"blocked\"}"},
		{"blocked by an abort",
			Step{Kind: StepTaskStatus, Prev: StateRunning, Status: "blocked", Reason: "Plan aborted by user", Aborted: true},
			StateBlocked, TypeTaskDone, `{"result":"cancelled","summary":"Plan aborted by user","status":"blocked"}`},
		{"another status",
			Step{Kind: StepTaskStatus, Prev: StateRunning, Status: "in_progress", PhasesDone: 1, PhasesTotal: 3},
			StateRunning, TypeTaskUpdate, `{"progress":33,"message":"task in_progress","status":"in_progress"}`},
		{"redispatch signal",
			Step{Kind: StepSignal, Prev: StateRunning, Signal: "redispatch"},
			StateRunning, TypeReplan, `{"reason":"redispatch requested","signal":"redispatch"}`},
		{"abort signal after the end keeps the state",
			Step{Kind: StepSignal, Prev: StateDone, Signal: "abort", Reason: "wrong branch"},
			StateDone, TypeMessage, `{"message":"abort requested: wrong branch","signal":"abort","reason":"wrong branch"}`},
		{"attempt ended",
			Step{Kind: StepAttemptEnded, Prev: StateBlocked, Attempt: 1, Plan: "karvi-t5-020d01", Status: "blocked",
				Reason: "Phase test failed after 3 attempts", PhasesDone: 1, PhasesTotal: 3, CostUSD: &cost},
			StateBlocked, TypeTaskUpdate,
			`{"progress":33,"message":"attempt 1 ended: blocked","attempt":1,"plan_name":"karvi-t5-020d01","ended":"blocked","last_error":"Phase test failed after 3 attempts"}`},
		{"attempt ended by a redispatch",
			Step{Kind: StepAttemptEnded, Prev: StateRunning, Attempt: 1, Plan: "karvi-t5-020d01", Status: "redispatched"},
			StateRunning, TypeTaskUpdate,
			`{"progress":0,"message":"attempt 1 ended: redispatched","attempt":1,"plan_name":"karvi-t5-020d01","ended":"redispatched"}`},
	}
	for i, tc := range tests {
		tc.step.Seq, tc.step.TS = i+1, at
		ev := FromStep(tc.step, ctx)
		if ev.State != tc.state || ev.Type != tc.typ || string(ev.Payload) != tc.payload {
			t.Errorf("%s: got %s %s %s", tc.name, ev.State, ev.Type, ev.Payload)
		}
		if ev.AgentID != WorkflowAgent || ev.Role != RolePlanner || ev.Provider != ProviderSystem ||
			ev.Mode != ModePipeline || ev.RunID != "run-T5" || ev.TaskID != "task-T5" {
			t.Errorf("%s: who: %+v", tc.name, ev)
		}
		if want := ctx.Source + "#seq=" + strconv.Itoa(i+1); ev.RawRef != want {
			t.Errorf("%s: raw_ref %q, want %q", tc.name, ev.RawRef, want)
		}
		if ev.TS != "2026-02-28T03:00:01.123Z" {
			t.Errorf("%s: ts %q", tc.name, ev.TS)
		}
		// Every step is a valid event as made, and redaction leaves it alone.
		got, warns, err := Validate(ev)
		if err != nil || len(warns) != 0 || !sameEvent(got, ev) {
			t.Errorf("%s: validate: %v %v", tc.name, warns, err)
		}
		if !sameEvent(Redact(ev), ev) {
			t.Errorf("%s: redaction changed a clean step", tc.name)
		}
	}
}

// The states FromStep gives follow the transition table along the paths a
// task takes; only what the table cannot know is left: a task started again
// after it completed.
func TestStepsFollowTheTransitions(t *testing.T) {
	paths := map[string][]Step{
		"completes": {{Kind: StepTaskStarted}, {Kind: StepAttemptStarted}, {Kind: StepTaskStatus, Status: "dispatched"},
			{Kind: StepTaskStatus, Status: "completed"}, {Kind: StepAttemptEnded, Status: "completed"}},
		"blocked, redispatched, completes": {{Kind: StepTaskStarted}, {Kind: StepAttemptStarted},
			{Kind: StepTaskStatus, Status: "blocked"}, {Kind: StepAttemptEnded, Status: "blocked"},
			{Kind: StepSignal, Signal: "redispatch"}, {Kind: StepAttemptStarted, Attempt: 2},
			{Kind: StepTaskStatus, Status: "dispatched"}, {Kind: StepTaskStatus, Status: "completed"}},
		"completed, then reopened": {{Kind: StepTaskStarted}, {Kind: StepTaskStatus, Status: "completed"},
			{Kind: StepAttemptEnded, Status: "completed"}, {Kind: StepSignal, Signal: "redispatch"},
			{Kind: StepReopened}, {Kind: StepAttemptStarted, Attempt: 2}},
		"aborted while running": {{Kind: StepTaskStarted}, {Kind: StepAttemptStarted}, {Kind: StepSignal, Signal: "abort"},
			{Kind: StepTaskStatus, Status: "blocked", Aborted: true}, {Kind: StepAttemptEnded, Status: "aborted"},
			{Kind: StepSignal, Signal: "abort"}},
	}
	for name, steps := range paths {
		var s Stream
		var prev State
		for i, st := range steps {
			st.Seq, st.Prev, st.TS = i+1, prev, time.Unix(0, 0)
			ev := FromStep(st, StepContext{RunID: "run-T1", Source: "temporal://default/workflows/w/r"})
			_, warns, err := s.Validate(ev)
			if err != nil || len(warns) != 0 {
				t.Errorf("%s: step %d (%s): %v %v", name, i, st.Kind, warns, err)
			}
			prev = ev.State
		}
	}
}

func TestRunIDAndSource(t *testing.T) {
	if got := RunIDForTask("T5"); got != "run-T5" {
		t.Errorf("RunIDForTask: %q", got)
	}
	// A task id that happens to start with run- keeps it: ids never collide.
	if got := RunIDForTask("run-5"); got != "run-run-5" {
		t.Errorf("RunIDForTask: %q", got)
	}
	if got := StepSource("my ns", "karvi-task-T5", "r1"); got != "temporal://my%20ns/workflows/karvi-task-T5/r1" {
		t.Errorf("StepSource: %q", got)
	}
	if !uri(StepSource("my ns", "a b", "r") + "#seq=1") {
		t.Error("StepSource is not a URI")
	}
}

func TestAgentFor(t *testing.T) {
	for _, tc := range []struct {
		base    string
		attempt int
		want    string
	}{
		{"conductor", 0, "conductor"}, {"conductor", 1, "conductor"}, {"conductor", 2, "conductor-r2"},
		{"Deploy.Prod", 12, "Deploy-Prod-r12"}, {strings.Repeat("x", 70), 3, strings.Repeat("x", 61) + "-r3"},
	} {
		if got := AgentFor(tc.base, tc.attempt); got != tc.want || !agentID(got) {
			t.Errorf("AgentFor(%q, %d) = %q, want %q", tc.base, tc.attempt, got, tc.want)
		}
	}
}

// A later attempt's conductor and phases are agents of their own, keeping
// the phase's role.
func TestFromConductorLaterAttempt(t *testing.T) {
	ctx := Context{RunID: "run-T5", Attempt: 2, Parent: WorkflowAgent, TS: "2026-01-01T00:00:00Z"}
	plan, _ := FromConductor(mapping.Event{Type: mapping.EventPlanStart}, ctx)
	phase, warns := FromConductor(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "test", Attempt: 1}, ctx)
	if plan.AgentID != "conductor-r2" || plan.ParentAgentID != WorkflowAgent {
		t.Errorf("plan: %s parent %s", plan.AgentID, plan.ParentAgentID)
	}
	if phase.AgentID != "test-r2" || phase.ParentAgentID != "conductor-r2" || phase.Role != RoleTester || len(warns) != 0 {
		t.Errorf("phase: %s parent %s role %s %v", phase.AgentID, phase.ParentAgentID, phase.Role, warns)
	}
}

func TestTitleOf(t *testing.T) {
	if got := TitleOf("\n  Add auth.  \nmore", 80); got != "Add auth." {
		t.Errorf("%q", got)
	}
	if got := TitleOf("äöü", 2); got != "äö…" {
		t.Errorf("%q", got)
	}
}
