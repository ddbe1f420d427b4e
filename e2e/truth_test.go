//go:build realserver

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/karvifake"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/workflows"
)

// truthCase is one way an attempt ends without a terminal event, and what
// karvi must then be told.
type truthCase struct {
	id      string
	message string
	// act is done once the test phase runs (nil: the conductor ends alone);
	// st is the status that saw it run.
	act func(t *testing.T, r *testrig.Rig, id string, st taskapi.Status)
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
			act: func(t *testing.T, r *testrig.Rig, id string, _ taskapi.Status) {
				require.NoError(t, r.Signal(id, taskapi.SignalAbort, taskapi.AbortSignal{Reason: "wrong branch"}))
			},
			lastError: mapping.MsgUserAbort, settled: "test"},
		{id: "TR-KILLED", message: "Killed from outside. [sim phase=test hang=forever]",
			act: func(t *testing.T, r *testrig.Rig, id string, st taskapi.Status) {
				h, err := devenv.ReadHandle(r.WorkRoot, id, st.PlanName)
				require.NoError(t, err)
				require.Greater(t, h.PGID, 1)
				require.NoError(t, syscall.Kill(-h.PGID, syscall.SIGKILL))
			},
			lastError: "Conductor crashed: conductor was killed (no exit status was recorded) while phase test was running",
			settled:   "test"},
	}
}

// runTruthCases runs every case at once on one worker and returns their
// results by task id.
func runTruthCases(t *testing.T, r *testrig.Rig) map[string]taskapi.Result {
	cases := truthCases()
	runs := map[string]client.WorkflowRun{}
	for _, c := range cases {
		r.Workspace(c.id)
		runs[c.id] = r.Start(testrig.Dispatch(t, c.id, c.message))
	}
	for _, c := range cases {
		if c.act != nil {
			c.act(t, r, c.id, r.WaitPhase(c.id, "test"))
		}
	}
	res := map[string]taskapi.Result{}
	for _, c := range cases {
		res[c.id] = r.Result(runs[c.id])
		require.Equal(t, "blocked", string(res[c.id].Outcome.TaskStatus), c.id)
		require.True(t, strings.HasPrefix(res[c.id].Outcome.LastError, c.lastError),
			"%s: lastError %q, want it to start %q", c.id, res[c.id].Outcome.LastError, c.lastError)
	}
	return res
}

// conductorState is the state.json the conductor left for a task's plan.
func conductorState(t *testing.T, r *testrig.Rig, taskID, plan string) mapping.ConductorState {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(filepath.Dir(r.EventsPath(taskID, plan)), "state.json"))
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
func requireSettled(t *testing.T, where string, last map[string]any, c truthCase, res taskapi.Result) {
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
	require.NotEmpty(t, log, "%s: the last patch %v has no log", where, last)
	entry, _ := log[len(log)-1].(map[string]any)
	require.Equal(t, mapping.SettleAgent, entry["agent"], where)
	require.Equal(t, mapping.PatchTypeSettle, entry["action"], where)
}

// Every way an attempt ends without a terminal event (a phase timed out, an
// agent over budget, retries exhausted, agent crashes, the conductor dying,
// an abort mid-phase, the conductor killed from outside) leaves, in the file
// sink, a brief that agrees with state.json and shows no phase under way.
func TestFinalBriefTellsTheTruthFileSink(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	res := runTruthCases(t, r)
	for _, c := range truthCases() {
		rs := res[c.id]
		where := c.id + " file sink"
		brief := r.FileBrief(c.id)
		requireBriefTellsTheTruth(t, where, brief, conductorState(t, r, c.id, rs.PlanName))
		require.Equal(t, brief, testrig.NormalizeBrief(t, testrig.MustJSON(t, rs.Brief)), "%s: the workflow's brief", where)
		patches := r.FilePatches(c.id)
		require.NotEmpty(t, patches, where)
		requireSettled(t, where, patches[len(patches)-1], c, rs)
	}

	// The crash reason is the conductor's own word from its stderr, not a
	// copy of its event stream (it runs with --json).
	die := res["TR-DIE"].Outcome.LastError
	require.Contains(t, die, `; stderr: eddasim: simulated conductor crash in phase "test" (attempt 1)`)
	require.True(t, strings.HasSuffix(die, "(exit code 3)"), die)
	require.NotContains(t, die, `"seq"`)
	require.NotContains(t, die, "last output")
	blocker, _ := r.FileStatus("TR-DIE")["blocker"].(map[string]any)
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
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken})
	for _, c := range truthCases() {
		require.NoError(t, r.Karvi.AddTask(karvifake.Task{ID: c.id, Status: "dispatched", BriefPath: true,
			Brief: json.RawMessage(`{"meta":{"boardType":"brief"},"log":[]}`)}))
	}
	res := runTruthCases(t, r)
	for _, c := range truthCases() {
		rs := res[c.id]
		where := c.id + " karvi"
		requireBriefTellsTheTruth(t, where, r.KarviBrief(c.id), conductorState(t, r, c.id, rs.PlanName))
		// The last write of the brief: a PATCH, or the one PUT that carried
		// a short task's whole brief while karvi was congested (its
		// skeleton and every event held and merged, by design).
		var writes []json.RawMessage
		for _, w := range r.Karvi.Writes(c.id) {
			if (w.Method == "PATCH" || w.Method == "PUT") && strings.HasPrefix(w.Path, "/api/brief/") {
				writes = append(writes, w.Body)
			}
		}
		require.NotEmpty(t, writes, where)
		var last map[string]any
		require.NoError(t, json.Unmarshal(writes[len(writes)-1], &last), where)
		requireSettled(t, where, last, c, rs)
		require.Equal(t, "blocked", r.KarviStatus(c.id), where)
	}
}

// What the Web UI reads: the summary fixed at start, and current details
// that name the phase under way while the task runs and end as the table of
// every phase with how the task ended; activities say what they did.
func TestWebUIDetailsTellTheStory(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	const id = "TR-UI"
	r.Workspace(id)
	d := testrig.Dispatch(t, id, "Show the story in the Web UI.\nSecond line. "+testrig.ExampleCosts+" [sim phase=test hang=forever]")
	// The details change at the workflow's checkpoints (every 5 s by
	// default); checkpointing every 200 ms only spares the test that wait.
	run := r.StartAsStarter(taskapi.TaskInput{Dispatch: d,
		Tuning: &taskapi.Tuning{CheckpointEvery: 200 * time.Millisecond}})
	running := r.WaitDetails(id, "phase test under way", func(s string) bool {
		return strings.Contains(s, "current phase **test**")
	})
	st, err := r.Status(id)
	require.NoError(t, err)
	require.Equal(t, "test", st.CurrentPhase)
	require.Equal(t, taskapi.StageRunning, st.Stage)
	require.Equal(t, mapping.TaskInProgress, st.TaskStatus)

	desc, err := r.Client.DescribeWorkflow(t.Context(), taskapi.WorkflowID(id), "")
	require.NoError(t, err)
	summary, err := desc.GetStaticSummary()
	require.NoError(t, err)
	require.Equal(t, "TR-UI: Show the story in the Web UI.", summary)
	staticDetails, err := desc.GetStaticDetails()
	require.NoError(t, err)
	require.Contains(t, staticDetails, "Second line.")

	require.Contains(t, running, "| implement | passed | 1 |")
	require.Contains(t, running, "| **test** | running | 1 |")
	require.Contains(t, running, "| docs | pending |")
	require.Contains(t, running, "task in_progress")

	require.NoError(t, r.Signal(id, taskapi.SignalAbort, taskapi.AbortSignal{}))
	res := r.Result(run)
	require.Equal(t, mapping.MsgUserAbort, res.Outcome.LastError)

	ended := r.CurrentDetails(id)
	require.Contains(t, ended, "attempt 1 · ended · task blocked")
	require.Contains(t, ended, "| implement | passed | 1 |")
	require.Contains(t, ended, "| test | failed | 1 |  |  | Plan aborted by user |")
	require.Contains(t, ended, "| docs | pending |")
	require.Contains(t, ended, "**blocked**: Plan aborted by user")
	require.NotContains(t, ended, "running")

	// Each activity in the history carries a summary of what it did: one
	// starts the attempt, the delivering tail carries the events to the
	// sink, and the workflow itself sends only the settling patch and the
	// final status.
	h := r.History(id)
	summaries := testrig.ActivitySummaries(t, h)
	require.Contains(t, summaries, "start attempt 1 of task TR-UI")
	require.Contains(t, summaries, "status blocked: Plan aborted by user")
	require.Contains(t, summaries, "1 patch (settle), log 5 entries")
	var delivers, stops int
	for _, s := range summaries {
		switch {
		case strings.HasPrefix(s, "deliver "+res.PlanName+" from byte "):
			delivers++
		case strings.HasPrefix(s, "stop conductor "+res.PlanName+" (process group "):
			stops++
		}
	}
	require.Positive(t, delivers, "deliver summaries in %q", summaries)
	require.Equal(t, 1, stops, "stop summaries in %q", summaries)
	types := testrig.ActivityTypes(h)
	require.Equal(t, 1, types["StartAttempt"], "activities %v", types)
	require.Equal(t, delivers, types["DeliverEvents"], "activities %v", types)
	for _, old := range []string{"PreparePlan", "StartConductor", "TailEvents"} {
		require.Zero(t, types[old], "%s in a new workflow: activities %v", old, types)
	}

	// This history has the settling patch: it replays on the current code,
	// from memory and through the SDK's JSON history format that
	// workflows/register_test.go reads. TRUTH_WRITE_HISTORY=1 keeps it with
	// the recorded histories, beside settle-abort.json (the same story on
	// the earlier, per-event path), which it must not replace.
	require.NoError(t, testrig.Replay(h), "replay from memory")
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "settle-abort-deliver.json")
	if os.Getenv("TRUTH_WRITE_HISTORY") == "1" {
		path = filepath.Join("..", "workflows", "testdata", "histories", "settle-abort-deliver.json")
	}
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
	rep := worker.NewWorkflowReplayer()
	workflows.Register(rep)
	require.NoError(t, rep.ReplayWorkflowHistoryFromJSONFile(nil, path), "replay from %s", path)
}
