package taskflow

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// lastPatch decodes the last PATCH body the sink received.
func lastPatch(t *testing.T, f *fakeConductor) map[string]any {
	t.Helper()
	require.NotEmpty(t, f.patches)
	var m map[string]any
	require.NoError(t, json.Unmarshal(f.patches[len(f.patches)-1], &m))
	return m
}

func phaseIn(t *testing.T, body map[string]any, id string) map[string]any {
	t.Helper()
	phases, _ := body["phases"].(map[string]any)
	p, ok := phases[id].(map[string]any)
	require.True(t, ok, "phase %s not in %v", id, body)
	return p
}

func noPhaseUnderWay(t *testing.T, b mapping.Brief) {
	t.Helper()
	for id, p := range b.Phases {
		require.NotContains(t, []string{mapping.PhaseRunning, mapping.PhaseChecking}, p.Status, "phase %s", id)
	}
}

// Every way an attempt ends without a terminal event leaves a brief that
// agrees with the outcome, through one settling patch sent before the final
// status.
func TestEndsWithoutTerminalEventSettleTheBrief(t *testing.T) {
	events := loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")
	staleDocs := &mapping.ConductorState{PlanStatus: mapping.PlanRunning, Phases: []mapping.PhaseState{
		{ID: "implement", Status: mapping.PhasePassed, Attempts: 1},
		{ID: "test", Status: mapping.PhasePassed, Attempts: 1},
		{ID: "docs", Status: mapping.PhaseStale, Attempts: 1,
			Error: &mapping.PhaseError{ErrorType: mapping.ErrTimeout, Message: `phase "docs" timed out`}},
	}}
	cases := []struct {
		name   string
		f      *fakeConductor
		tuning *taskapi.Tuning
		abort  bool
		phase  string // the phase the settle moves
		status string
		err    string // its error, or the start of it
	}{
		{"abort mid-phase", &fakeConductor{events: events[:2]}, nil, true,
			"implement", mapping.PhaseFailed, "Plan aborted by user"},
		{"conductor crashed, no state.json", &fakeConductor{events: events[:4], exitAfterAll: true, exitCode: 3}, nil, false,
			"test", mapping.PhaseFailed, "Conductor crashed: conductor exited while phase test was running"},
		{"silent past its timeout", &fakeConductor{events: events[:2], timeoutSec: 30}, &taskapi.Tuning{SilenceGrace: time.Second}, false,
			"implement", mapping.PhaseStale, "Phase implement timed out"},
		{"state.json says stale", &fakeConductor{events: events[:6], exitAfterAll: true, exitState: staleDocs}, nil, false,
			"docs", mapping.PhaseStale, `phase "docs" timed out`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			f := c.f
			f.t = t
			f.register(env)
			if !c.f.exitAfterAll {
				env.RegisterDelayedCallback(func() {
					f.mu.Lock()
					f.hang = true
					f.mu.Unlock()
				}, time.Second)
			}
			if c.abort {
				env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalAbort, taskapi.AbortSignal{}) }, 10*time.Second)
			}
			env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Tuning: c.tuning})
			require.NoError(t, env.GetWorkflowError())
			var res taskapi.Result
			require.NoError(t, env.GetWorkflowResult(&res))
			require.Equal(t, mapping.TaskBlocked, res.Outcome.TaskStatus)

			n := len(f.timeline)
			require.Equal(t, []string{"patch settle", "status blocked"}, f.timeline[n-2:], "settle, then the status")
			got := phaseIn(t, lastPatch(t, f), c.phase)
			require.Equal(t, c.status, got["status"])
			require.True(t, strings.HasPrefix(got["error"].(string), c.err), got["error"])

			require.Equal(t, c.status, res.Brief.Phases[c.phase].Status)
			noPhaseUnderWay(t, res.Brief)
			entry := res.Brief.Log[len(res.Brief.Log)-1]
			require.Equal(t, mapping.SettleAgent, entry.Agent)
			require.Equal(t, mapping.PatchTypeSettle, entry.Action)
		})
	}
}

// Example B's brief already tells the truth when the conductor exits: no
// settling patch, so its golden PATCH sequence is what karvi receives.
func TestRetriesExhaustedSendsNoSettlingPatch(t *testing.T) {
	_, f := runExampleB(t)
	want := readLines(t, "../../testdata/examples/B/patches.jsonl")
	require.Len(t, f.patches, len(want)+1, "the skeleton and one patch per event, nothing more")
	for i, w := range want {
		require.JSONEq(t, w, string(f.patches[i+1]), "patch %d", i+1)
	}
	require.NotContains(t, f.timeline, "patch settle")
}

// The details the Web UI shows, for a task under way and for one that
// ended: the phases in plan order with their status, attempts, duration and
// cost, and how the task ended.
func TestRenderDetails(t *testing.T) {
	events := loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")
	plan := &taskact.PlanInfo{Summary: mapping.PlanSummary{Name: "karvi-t5-020d01",
		PhaseIDs: []string{"implement", "test", "docs"}}}
	brief := func(n int) mapping.BriefState {
		s := mapping.NewBriefState("T5", plan.Summary)
		for i, ev := range events[:n] {
			ev.Pos = mapping.Position{Offset: int64(i)}
			s.Reduce(ev)
		}
		return s
	}
	running := State{Dispatch: mapping.DispatchPlan{TaskID: "T5"}, TaskStatus: mapping.TaskInProgress,
		Current: Attempt{N: 1, Stage: taskapi.StageRunning, Plan: plan, Brief: brief(4)}}
	require.Equal(t, "**T5** · attempt 1 · running · task in_progress\n\n"+
		"plan `karvi-t5-020d01` · current phase **test** · 1 of 3 phases done · $0.85\n\n"+
		"| phase | status | attempts | duration | cost | note |\n|---|---|---|---|---|---|\n"+
		"| implement | passed | 1 | 1m59s | $0.85 |  |\n"+
		"| **test** | running | 1 |  |  |  |\n"+
		"| docs | pending |  |  |  |  |\n", renderDetails(&running))

	ended := running
	ended.TaskStatus = mapping.TaskBlocked
	o := mapping.AbortedOutcome()
	ended.Current.Stage, ended.Current.Outcome = taskapi.StageDone, &o
	ended.Current.Brief = brief(4)
	ended.Current.Brief.Settle(o, nil, "t")
	require.Equal(t, "**T5** · attempt 1 · ended · task blocked\n\n"+
		"**blocked**: Plan aborted by user\n\n"+
		"plan `karvi-t5-020d01` · 1 of 3 phases done · $0.85\n\n"+
		"| phase | status | attempts | duration | cost | note |\n|---|---|---|---|---|---|\n"+
		"| implement | passed | 1 | 1m59s | $0.85 |  |\n"+
		"| test | failed | 1 |  |  | Plan aborted by user |\n"+
		"| docs | pending |  |  |  |  |\n", renderDetails(&ended))

	// Free text is folded onto one line, cut, and cannot break the table.
	long := ended
	long.Current.Brief = ended.Current.Brief.Clone()
	p := long.Current.Brief.Brief.Phases["test"]
	p.Error = "cmd `a | b`\nexited 1: " + strings.Repeat("x", 80)
	long.Current.Brief.Brief.Phases["test"] = p
	require.Contains(t, renderDetails(&long), "| test | failed | 1 |  |  | cmd `a \\| b` exited 1: "+strings.Repeat("x", 37)+"… |\n")

	preparing := State{Dispatch: mapping.DispatchPlan{TaskID: "T5"}, Current: newAttempt(2, time.Time{})}
	require.Equal(t, "**T5** · attempt 2 · preparing\n\nPreparing the plan.\n", renderDetails(&preparing))
}

func TestStartSummary(t *testing.T) {
	d := mapping.DispatchPlan{TaskID: "T5", PlanID: "disp_001",
		Message: "\n  Add user authentication with JWT.\nUse the existing user table.\n"}
	s, details := taskapi.StartSummary(d, 1)
	require.Equal(t, "T5: Add user authentication with JWT.", s)
	require.Equal(t, "karvi task **T5** · dispatch `disp_001` · attempt 1\n\n"+
		"Add user authentication with JWT.\nUse the existing user table.", details)
	s, _ = taskapi.StartSummary(mapping.DispatchPlan{TaskID: "T6", Message: strings.Repeat("é", 300)}, 2)
	require.Equal(t, "T6: "+strings.Repeat("é", summaryRunes-1)+"… (attempt 2)", s)
}

func TestActivitySummaries(t *testing.T) {
	a := &Attempt{Plan: &taskact.PlanInfo{Summary: mapping.PlanSummary{Name: "karvi-t5-020d01"}},
		Cursor: taskact.TailCursor{Offset: 1234}}
	require.Equal(t, "tail karvi-t5-020d01 from byte 1234", tailSummary("tail", a))
	a.Cursor.Gen = 2
	require.Equal(t, "drain karvi-t5-020d01 from byte 1234 (log generation 2)", tailSummary("drain", a))
	ps := []mapping.Patch{{Type: "phase_passed"}, {Type: "phase_start"}, {Type: "phase_start"}}
	require.Equal(t, "3 patches (phase_passed, phase_start), log 7 entries", patchSummary(ps, 7))
	require.Equal(t, "1 patch (settle), log 9 entries", patchSummary([]mapping.Patch{{Type: "settle"}}, 9))
	require.Equal(t, "status in_progress", statusSummary(taskact.TaskStatusUpdate{Status: mapping.TaskInProgress}))
	require.Equal(t, "status blocked: Phase docs timed out",
		statusSummary(taskact.TaskStatusUpdate{Status: mapping.TaskBlocked, Reason: "Phase docs\ntimed out"}))
}
