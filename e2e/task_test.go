package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/devenv"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows"
)

func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	out, err := devenv.ReadJSONL(path)
	require.NoError(t, err)
	return out
}

func seedBrief(t *testing.T) map[string]any {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "examples", "A", "brief.json"))
	require.NoError(t, err)
	return normalizeBrief(t, data)
}

// fileBrief is what the file sink holds for a task: the merged brief,
// without what depends on the clock.
func (r *rig) fileBrief(taskID string) map[string]any {
	m, err := devenv.FileBrief(r.sinkDir, taskID)
	require.NoError(r.t, err)
	return m
}

// filePatches are the PATCH bodies the file sink received, in order.
func (r *rig) filePatches(taskID string) []map[string]any {
	out, err := devenv.FilePatches(r.sinkDir, taskID)
	require.NoError(r.t, err)
	return out
}

func (r *rig) fileStatus(taskID string) map[string]any {
	m, err := devenv.FileStatus(r.sinkDir, taskID)
	require.NoError(r.t, err)
	return m
}

func eventsOf(t *testing.T, workDir, plan string) []map[string]any {
	return readJSONL(t, filepath.Join(workDir, ".edda", "conductor", plan, "events.jsonl"))
}

// Happy path: the brief equals the seed's example A final brief (times
// aside), and the PATCHes arrived in the seed's order.
func TestHappyPathFileSink(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.workspace("T5")
	res := r.result(r.start(dispatch(t, "T5", "Add user authentication with JWT. "+seedCosts)))

	require.Equal(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, "completed", res.Outcome.DispatchState)
	require.Equal(t, seedBrief(t), r.fileBrief("T5"), "brief in the sink")
	require.Equal(t, seedBrief(t), normalizeBrief(t, mustJSON(t, res.Brief)), "brief in the workflow")

	// One skeleton patch, then exactly the golden sequence, in order.
	golden := readJSONL(t, filepath.Join("..", "testdata", "examples", "A", "patches.jsonl"))
	got := r.filePatches("T5")
	require.Len(t, got, len(golden)+1)
	for i := range golden {
		require.Equal(t, normalize(golden[i]), normalize(got[i+1]), "patch %d", i+1)
	}
	st := r.fileStatus("T5")
	require.Equal(t, "completed", st["status"])
}

func mustJSON(t *testing.T, v any) []byte {
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// Retries exhausted: the simulator, like edda, writes no terminal event and
// exits 0; the outcome comes from state.json.
func TestRetriesExhaustedBlocksWithSeedWording(t *testing.T) {
	r := newRig(t, rigOptions{cargoExit: 1})
	work := r.workspace("T5")
	res := r.result(r.start(dispatch(t, "T5", "Add user authentication with JWT.")))

	require.Equal(t, "blocked", res.Outcome.TaskStatus)
	require.Equal(t, "failed", res.Outcome.DispatchState)
	require.Equal(t, "Phase test failed after 3 attempts: check failed: cmd `cargo test` exited 1", res.Outcome.LastError)
	require.Equal(t, "Phase test failed: cmd `cargo test` exited 1", res.Outcome.BlockerReason)
	for _, ev := range eventsOf(t, work, res.PlanName) {
		require.NotContains(t, []any{"plan_completed", "plan_aborted"}, ev["type"], "no terminal event was needed")
	}
	st := r.fileStatus("T5")
	require.Equal(t, "blocked", st["status"])
	blocker, _ := st["blocker"].(map[string]any)
	require.Equal(t, res.Outcome.BlockerReason, blocker["reason"])
	require.NotEmpty(t, blocker["askedAt"])
}

// Abort during a phase: the conductor's process group is gone and the task
// is blocked "Plan aborted by user".
func TestAbortDuringPhase(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.workspace("T7")
	run := r.start(dispatch(t, "T7", "Slow task. [sim phase=test hang=forever]"))
	r.waitPhase("T7", "test")
	hs, err := devenv.Handles(r.workRoot)
	require.NoError(t, err)
	require.Len(t, hs, 1)
	require.True(t, proc.GroupAlive(hs[0].PGID))

	require.NoError(t, r.cl.SignalWorkflow(context.Background(), workflows.WorkflowID("T7"), "", workflows.SignalAbort, workflows.AbortSignal{}))
	res := r.result(run)
	require.Equal(t, "blocked", res.Outcome.TaskStatus)
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	require.False(t, proc.GroupAlive(hs[0].PGID), "no process of the conductor's group survives")
	require.Equal(t, "Plan aborted by user", r.fileStatus("T7")["blocker"].(map[string]any)["reason"])
}

// Redispatch during a phase: the old group is gone, the new attempt has a
// new plan name and REDISPATCH=1 on every phase, and the task completes.
func TestRedispatchDuringPhase(t *testing.T) {
	r := newRig(t, rigOptions{})
	work := r.workspace("T8")
	run := r.start(dispatch(t, "T8", "Task to redo. [sim phase=test delay=3s]"))
	first := r.waitPhase("T8", "test")
	hs, err := devenv.Handles(r.workRoot)
	require.NoError(t, err)
	require.Len(t, hs, 1)
	oldGroup := hs[0].PGID

	require.NoError(t, r.cl.SignalWorkflow(context.Background(), workflows.WorkflowID("T8"), "", workflows.SignalRedispatch, workflows.RedispatchSignal{}))
	res := r.result(run)
	require.Equal(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 2, res.Attempt)
	require.NotEqual(t, first.PlanName, res.PlanName)
	require.Equal(t, mapping.PlanName("T8", 2), res.PlanName)
	require.False(t, proc.GroupAlive(oldGroup), "the first attempt's conductor is gone")
	require.Equal(t, "redispatched", res.Attempts[0].Ended)

	// REDISPATCH=1 reached every phase of the new plan, as the conductor saw it.
	stateDir := filepath.Join(work, ".edda", "conductor", res.PlanName)
	for _, phase := range []string{"implement", "test", "docs"} {
		data, err := os.ReadFile(filepath.Join(stateDir, "phase-env-"+phase+".json"))
		require.NoError(t, err, "phase %s env", phase)
		var env map[string]string
		require.NoError(t, json.Unmarshal(data, &env))
		require.Equal(t, "1", env["REDISPATCH"], "phase %s", phase)
	}
	plan, err := os.ReadFile(filepath.Join(r.workRoot, "runs", "T8", res.PlanName, "plan.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(plan), "REDISPATCH")
}

// A worker SIGKILLed during a phase and started again: the workflow ends
// with the same brief as an undisturbed run, no log entry lost or doubled,
// and the conductor is not started again.
func TestWorkerKilledDuringPhase(t *testing.T) {
	r := newRig(t, rigOptions{})
	work := r.workspace("T5")
	run := r.start(dispatch(t, "T5", "Add user authentication with JWT. "+seedCosts+" [sim phase=test delay=3s]"))
	r.waitPhase("T5", "test")
	before, err := devenv.Handles(r.workRoot)
	require.NoError(t, err)
	require.Len(t, before, 1)

	require.NoError(t, r.worker.Kill())
	require.True(t, proc.GroupAlive(before[0].PGID), "the conductor outlives the worker")
	time.Sleep(500 * time.Millisecond) // let the conductor write while no worker runs
	r.startWorker()

	res := r.result(run)
	require.Equal(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, seedBrief(t), r.fileBrief("T5"))
	require.Len(t, res.Brief.Log, 8, "one log entry per event, none lost or doubled")

	after, err := devenv.Handles(r.workRoot)
	require.NoError(t, err)
	require.Len(t, after, 1)
	require.Equal(t, before[0].PID, after[0].PID, "conductor not started again")
	var starts int
	for _, ev := range eventsOf(t, work, res.PlanName) {
		if ev["type"] == "plan_start" {
			starts++
		}
	}
	require.Equal(t, 1, starts, "one conductor run wrote the whole log")
}

// A second start for a task whose workflow runs is refused clearly.
func TestDuplicateStartRefused(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.workspace("T9")
	run := r.start(dispatch(t, "T9", "Long. [sim phase=implement hang=forever]"))
	r.waitPhase("T9", "implement")
	starter, err := devenv.Binary("starter")
	require.NoError(t, err)
	path := filepath.Join(r.dir, "t9.json")
	require.NoError(t, os.WriteFile(path, mustJSON(t, dispatch(t, "T9", "again")), 0o644))
	out, err := runCmd(starter, "start", "-address", server.Addr, "-task-queue", r.queue, path)
	require.Error(t, err)
	require.Contains(t, out, "task T9 already has a running workflow")

	out, err = runCmd(starter, "abort", "-address", server.Addr, "T9")
	require.NoError(t, err, out)
	res := r.result(run)
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	require.Equal(t, 1, countHandles(t, r.workRoot), "the refused start spawned nothing")
}

func runCmd(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

func countHandles(t *testing.T, workRoot string) int {
	hs, err := devenv.Handles(workRoot)
	require.NoError(t, err)
	return len(hs)
}
