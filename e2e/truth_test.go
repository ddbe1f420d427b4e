//go:build realserver

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/internal/devenv"
	"karvi-edda-temporal/internal/karvifake"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows"
)

// truthCase is one way an attempt ends without a terminal event, and what
// karvi must then be told.
type truthCase struct {
	id      string
	message string
	// act is done once the test phase runs (nil: the conductor ends alone).
	act func(t *testing.T, r *rig, id string)
	// lastError is the outcome's lastError, or its start.
	lastError string
	// settled names the phase the last patch must settle, "" when the
	// events already told the truth.
	settled string
}

func truthCases() []truthCase {
	return []truthCase{
		{id: "TR-TIMEOUT", message: "A phase that times out. [sim phase=docs timeout]",
			lastError: "Phase docs timed out", settled: "docs"},
		{id: "TR-BUDGET", message: "An agent over its budget. [sim phase=test budget]",
			lastError: "Budget exceeded"},
		{id: "TR-RETRIES", message: "Checks that never pass. [sim phase=test fail]",
			lastError: "Phase test failed after 3 attempts: check failed: "},
		{id: "TR-CRASH", message: "An agent that crashes every time. [sim phase=test crash]",
			lastError: "Phase test agent crashed: "},
		{id: "TR-DIE", message: "A conductor that dies. [sim phase=test die]",
			lastError: "Conductor crashed: conductor exited while phase test was running", settled: "test"},
		{id: "TR-ABORT", message: "Aborted mid-phase. [sim phase=test hang=forever]",
			act: func(t *testing.T, r *rig, id string) {
				require.NoError(t, r.cl.SignalWorkflow(context.Background(), workflows.WorkflowID(id), "",
					workflows.SignalAbort, workflows.AbortSignal{Reason: "wrong branch"}))
			},
			lastError: mapping.MsgUserAbort, settled: "test"},
		{id: "TR-KILLED", message: "Killed from outside. [sim phase=test hang=forever]",
			act: func(t *testing.T, r *rig, id string) {
				h := runHandle(t, r, id)
				require.NoError(t, syscall.Kill(-h.PGID, syscall.SIGKILL))
			},
			lastError: "Conductor crashed: conductor was killed (no exit status was recorded) while phase test was running",
			settled:   "test"},
	}
}

// runHandle is the one conductor run of a task.
func runHandle(t *testing.T, r *rig, taskID string) proc.Handle {
	t.Helper()
	hs, err := devenv.Handles(filepath.Join(r.workRoot))
	require.NoError(t, err)
	for _, h := range hs {
		if strings.Contains(h.LogPath, string(filepath.Separator)+taskID+string(filepath.Separator)) {
			return h
		}
	}
	t.Fatalf("no conductor run of %s among %d", taskID, len(hs))
	return proc.Handle{}
}

// runTruthCases runs every case at once on one worker and returns their
// results by task id.
func runTruthCases(t *testing.T, r *rig) map[string]workflows.Result {
	cases := truthCases()
	runs := map[string]client.WorkflowRun{}
	for _, c := range cases {
		r.workspace(c.id)
		runs[c.id] = startWithSummary(t, r, dispatch(t, c.id, c.message))
	}
	for _, c := range cases {
		if c.act != nil {
			r.waitPhase(c.id, "test")
			c.act(t, r, c.id)
		}
	}
	res := map[string]workflows.Result{}
	for _, c := range cases {
		res[c.id] = r.result(runs[c.id])
		require.Equal(t, "blocked", string(res[c.id].Outcome.TaskStatus), c.id)
		require.True(t, strings.HasPrefix(res[c.id].Outcome.LastError, c.lastError),
			"%s: lastError %q, want it to start %q", c.id, res[c.id].Outcome.LastError, c.lastError)
	}
	return res
}

// startWithSummary starts a task as the starter does, summary included.
func startWithSummary(t *testing.T, r *rig, d mapping.DispatchPlan) client.WorkflowRun {
	t.Helper()
	summary, details := workflows.StartSummary(d, 1)
	run, err := r.cl.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID:                       workflows.WorkflowID(d.TaskID),
		TaskQueue:                r.queue,
		StaticSummary:            summary,
		StaticDetails:            details,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}, workflows.TaskWorkflowName, workflows.TaskInput{Dispatch: d})
	require.NoError(t, err)
	return run
}

// conductorState is the state.json the conductor left for a task's plan.
func conductorState(t *testing.T, r *rig, taskID, plan string) mapping.ConductorState {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.workRoot, "tasks", taskID, ".edda", "conductor", plan, "state.json"))
	require.NoError(t, err)
	cs, err := mapping.ParseConductorState(data)
	require.NoError(t, err)
	return cs
}

// requireBriefTellsTheTruth holds a final brief to state.json: no phase
// under way, and every phase where state.json says it settled; a phase
// state.json leaves under way (the conductor died in it) failed or stale.
func requireBriefTellsTheTruth(t *testing.T, where string, brief map[string]any, cs mapping.ConductorState) {
	t.Helper()
	phases, _ := brief["phases"].(map[string]any)
	require.Len(t, phases, 3, "%s: phases %v", where, brief["phases"])
	for id, v := range phases {
		p, _ := v.(map[string]any)
		require.NotContains(t, []any{mapping.PhaseRunning, mapping.PhaseChecking}, p["status"], "%s: phase %s", where, id)
	}
	for _, sp := range cs.Phases {
		p, _ := phases[sp.ID].(map[string]any)
		require.NotNil(t, p, "%s: phase %s missing", where, sp.ID)
		switch sp.Status {
		case mapping.PhaseRunning, mapping.PhaseChecking:
			require.Contains(t, []any{mapping.PhaseFailed, mapping.PhaseStale}, p["status"],
				"%s: phase %s, %s in state.json when the conductor died", where, sp.ID, sp.Status)
		default:
			require.Equal(t, sp.Status, p["status"], "%s: phase %s", where, sp.ID)
		}
		if sp.Attempts > 0 {
			require.EqualValues(t, sp.Attempts, p["attempts"], "%s: phase %s attempts", where, sp.ID)
		}
	}
}

// requireSettled checks the last patch a sink got settles the named phase
// with the outcome's words, and that the log says so.
func requireSettled(t *testing.T, where string, last map[string]any, c truthCase, res workflows.Result) {
	t.Helper()
	if c.settled == "" {
		return
	}
	phases, _ := last["phases"].(map[string]any)
	p, _ := phases[c.settled].(map[string]any)
	require.NotNil(t, p, "%s: the last patch %v does not settle %s", where, last, c.settled)
	if c.settled == "test" { // interrupted: the outcome's words
		require.Equal(t, mapping.PhaseFailed, p["status"], where)
		require.Equal(t, res.Outcome.LastError, p["error"], where)
	}
	log, _ := last["log"].([]any)
	entry, _ := log[len(log)-1].(map[string]any)
	require.Equal(t, mapping.SettleAgent, entry["agent"], where)
	require.Equal(t, mapping.PatchTypeSettle, entry["action"], where)
}

// Every way an attempt ends without a terminal event (a phase timed out, an
// agent over budget, retries exhausted, agent crashes, the conductor dying,
// an abort mid-phase, the conductor killed from outside) leaves, in the file
// sink, a brief that agrees with state.json and shows no phase under way.
func TestFinalBriefTellsTheTruthFileSink(t *testing.T) {
	r := newRig(t, rigOptions{})
	res := runTruthCases(t, r)
	for _, c := range truthCases() {
		rs := res[c.id]
		where := c.id + " file sink"
		brief := r.fileBrief(c.id)
		requireBriefTellsTheTruth(t, where, brief, conductorState(t, r, c.id, rs.PlanName))
		require.Equal(t, brief, normalizeBrief(t, mustJSON(t, rs.Brief)), "%s: the workflow's brief", where)
		patches := r.filePatches(c.id)
		requireSettled(t, where, patches[len(patches)-1], c, rs)
	}

	// The crash reason is the conductor's own word from its stderr, not a
	// copy of its event stream (it runs with --json).
	die := res["TR-DIE"].Outcome.LastError
	require.Contains(t, die, `; stderr: eddasim: simulated conductor crash in phase "test" (attempt 1)`)
	require.True(t, strings.HasSuffix(die, "(exit code 3)"), die)
	require.NotContains(t, die, `"seq"`)
	require.NotContains(t, die, "last output")
	blocker, _ := r.fileStatus("TR-DIE")["blocker"].(map[string]any)
	require.Equal(t, die, blocker["reason"])
	for _, c := range truthCases() {
		require.NotContains(t, res[c.id].Outcome.LastError, `"seq"`, c.id)
	}
	// Killed, it said nothing: its progress lines are no cause.
	require.NotContains(t, res["TR-KILLED"].Outcome.LastError, "last output")
}

// The same against a server that holds karvi's rules: karvi's copy of the
// brief ends where the conductor's state.json says.
func TestFinalBriefTellsTheTruthKarvi(t *testing.T) {
	k := startKarvi(t)
	for _, c := range truthCases() {
		require.NoError(t, k.AddTask(karvifake.Task{ID: c.id, Status: "dispatched", BriefPath: true,
			Brief: json.RawMessage(`{"meta":{"boardType":"brief"},"log":[]}`)}))
	}
	r := newRig(t, rigOptions{sink: "karvi", karviURL: k.URL(), env: []string{"KARVI_API_TOKEN=" + karviToken}})
	res := runTruthCases(t, r)
	for _, c := range truthCases() {
		rs := res[c.id]
		where := c.id + " karvi"
		brief := normalize(k.Brief(c.id)).(map[string]any)
		requireBriefTellsTheTruth(t, where, brief, conductorState(t, r, c.id, rs.PlanName))
		var last map[string]any
		for _, w := range k.Writes(c.id) {
			if strings.HasPrefix(w.Path, "/api/brief/") {
				last = nil
				require.NoError(t, json.Unmarshal(w.Body, &last))
			}
		}
		requireSettled(t, where, last, c, rs)
		task, ok := k.Task(c.id)
		require.True(t, ok)
		require.Equal(t, "blocked", task.Status, where)
	}
}

// What the Web UI reads: the summary fixed at start, and current details
// that name the phase under way while the task runs and end as the table of
// every phase with how the task ended; activities say what they did.
func TestWebUIDetailsTellTheStory(t *testing.T) {
	r := newRig(t, rigOptions{})
	const id = "TR-UI"
	r.workspace(id)
	d := dispatch(t, id, "Show the story in the Web UI.\nSecond line. "+seedCosts+" [sim phase=test hang=forever]")
	run := startWithSummary(t, r, d)
	r.waitFor(id, "phase test running, task in progress", func(s workflows.Status) bool {
		return s.CurrentPhase == "test" && s.Stage == workflows.StageRunning && s.TaskStatus == mapping.TaskInProgress
	})
	ctx := context.Background()

	desc, err := r.cl.DescribeWorkflow(ctx, workflows.WorkflowID(id), "")
	require.NoError(t, err)
	summary, err := desc.GetStaticSummary()
	require.NoError(t, err)
	require.Equal(t, "TR-UI: Show the story in the Web UI.", summary)
	staticDetails, err := desc.GetStaticDetails()
	require.NoError(t, err)
	require.Contains(t, staticDetails, "Second line.")

	running := currentDetails(t, r, id)
	require.Contains(t, running, "current phase **test**")
	require.Contains(t, running, "| implement | passed | 1 |")
	require.Contains(t, running, "| **test** | running | 1 |")
	require.Contains(t, running, "| docs | pending |")
	require.Contains(t, running, "task in_progress")

	require.NoError(t, r.cl.SignalWorkflow(ctx, workflows.WorkflowID(id), "", workflows.SignalAbort, workflows.AbortSignal{}))
	res := r.result(run)
	require.Equal(t, mapping.MsgUserAbort, res.Outcome.LastError)

	ended := currentDetails(t, r, id)
	require.Contains(t, ended, "attempt 1 · ended · task blocked")
	require.Contains(t, ended, "| implement | passed | 1 |")
	require.Contains(t, ended, "| test | failed | 1 |  |  | Plan aborted by user |")
	require.Contains(t, ended, "| docs | pending |")
	require.Contains(t, ended, "**blocked**: Plan aborted by user")
	require.NotContains(t, ended, "running")

	// Each activity in the history carries a summary of what it did.
	h := history(t, r, id)
	summaries := activitySummaries(t, h)
	require.Contains(t, summaries, "plan attempt 1 of task TR-UI")
	require.Contains(t, summaries, "start conductor "+res.PlanName)
	require.Contains(t, summaries, "status in_progress")
	require.Contains(t, summaries, "status blocked: Plan aborted by user")
	require.Contains(t, summaries, "1 patch (settle), log 5 entries")
	var tails int
	for _, s := range summaries {
		if strings.HasPrefix(s, "tail "+res.PlanName+" from byte ") {
			tails++
		}
	}
	require.Positive(t, tails, "tail summaries in %q", summaries)

	// This history has the settling patch: it replays on the current code.
	// TRUTH_WRITE_HISTORY=1 keeps it with the recorded histories.
	rep := worker.NewWorkflowReplayer()
	workflows.Register(rep)
	require.NoError(t, rep.ReplayWorkflowHistory(nil, h))
	if os.Getenv("TRUTH_WRITE_HISTORY") == "1" {
		data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
		require.NoError(t, err)
		path := filepath.Join("..", "workflows", "testdata", "histories", "settle-abort.json")
		require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
	}
}

// currentDetails asks the workflow for its metadata, as the Web UI does.
func currentDetails(t *testing.T, r *rig, taskID string) string {
	t.Helper()
	v, err := r.cl.QueryWorkflow(context.Background(), workflows.WorkflowID(taskID), "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

func history(t *testing.T, r *rig, taskID string) *historypb.History {
	t.Helper()
	it := r.cl.GetWorkflowHistory(context.Background(), workflows.WorkflowID(taskID), "", false,
		enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	return h
}

// activitySummaries are the summaries of the activities and local
// activities (markers) in a history, in order.
func activitySummaries(t *testing.T, h *historypb.History) []string {
	t.Helper()
	var out []string
	for _, ev := range h.Events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_MARKER_RECORDED:
		default:
			continue
		}
		p := ev.GetUserMetadata().GetSummary()
		if p == nil {
			continue
		}
		out = append(out, payloadString(t, p))
	}
	return out
}

func payloadString(t *testing.T, p *commonpb.Payload) string {
	t.Helper()
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &s))
	return s
}
