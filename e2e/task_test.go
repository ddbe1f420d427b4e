//go:build realserver

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// Happy path: the brief equals example A's final brief (times aside), and
// the PATCHes arrived in example A's order.
func TestHappyPathFileSink(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	r.Workspace("T5")
	res := r.Result(r.Start(testrig.Dispatch(t, "T5", "Add user authentication with JWT. "+testrig.ExampleCosts)))

	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.EqualValues(t, "completed", res.Outcome.DispatchState)
	require.Equal(t, testrig.ExampleBriefFor(t, "T5", res.PlanName), r.FileBrief("T5"), "brief in the sink")
	require.Equal(t, testrig.ExampleBriefFor(t, "T5", res.PlanName), testrig.NormalizeBrief(t, testrig.MustJSON(t, res.Brief)), "brief in the workflow")

	// One skeleton patch, then exactly the golden sequence, in order.
	golden := testrig.ExamplePatchesFor(t, res.PlanName)
	got := r.FilePatches("T5")
	require.Len(t, got, len(golden)+1)
	for i := range golden {
		require.Equal(t, testrig.Normalize(golden[i]), testrig.Normalize(got[i+1]), "patch %d", i+1)
	}
	st := r.FileStatus("T5")
	require.Equal(t, "completed", st["status"])
}

// Retries exhausted: the simulator, like edda, writes no terminal event and
// exits 0; the outcome comes from state.json.
func TestRetriesExhaustedBlocksWithContractWording(t *testing.T) {
	r := testrig.New(t, testrig.Options{CargoExit: 1})
	r.Workspace("T5")
	res := r.Result(r.Start(testrig.Dispatch(t, "T5", "Add user authentication with JWT.")))

	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.EqualValues(t, "failed", res.Outcome.DispatchState)
	require.Equal(t, "Phase test failed after 3 attempts: check failed: cmd `cargo test` exited 1", res.Outcome.LastError)
	require.Equal(t, "Phase test failed: cmd `cargo test` exited 1", res.Outcome.BlockerReason)
	for _, ev := range r.Events("T5", res.PlanName) {
		require.NotContains(t, []any{"plan_completed", "plan_aborted"}, ev["type"], "no terminal event was needed")
	}
	st := r.FileStatus("T5")
	require.Equal(t, "blocked", st["status"])
	blocker, _ := st["blocker"].(map[string]any)
	require.Equal(t, res.Outcome.BlockerReason, blocker["reason"])
	require.NotEmpty(t, blocker["askedAt"])
}

// Abort during a phase: the conductor's process group is gone and the task
// is blocked "Plan aborted by user".
func TestAbortDuringPhase(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	r.Workspace("T7")
	run := r.Start(testrig.Dispatch(t, "T7", "Slow task. [sim phase=test hang=forever]"))
	r.WaitPhase("T7", "test")
	hs, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.Len(t, hs, 1)
	require.True(t, proc.GroupAlive(hs[0].PGID))

	require.NoError(t, r.Signal("T7", taskapi.SignalAbort, taskapi.AbortSignal{}))
	res := r.Result(run)
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	require.False(t, proc.GroupAlive(hs[0].PGID), "no process of the conductor's group survives")
	require.Equal(t, "Plan aborted by user", r.FileStatus("T7")["blocker"].(map[string]any)["reason"])
}

// Redispatch during a phase: the old group is gone, the new attempt has a
// new plan name and REDISPATCH=1 on every phase, and the task completes.
func TestRedispatchDuringPhase(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	work := r.Workspace("T8")
	run := r.Start(testrig.Dispatch(t, "T8", "Task to redo. [sim phase=test delay=3s]"))
	first := r.WaitPhase("T8", "test")
	hs, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.Len(t, hs, 1)
	oldGroup := hs[0].PGID

	require.NoError(t, r.Signal("T8", taskapi.SignalRedispatch, taskapi.RedispatchSignal{}))
	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 2, res.Attempt)
	require.NotEqual(t, first.PlanName, res.PlanName)
	require.True(t, mapping.IsAttemptPlan(res.PlanName, "T8", 2), res.PlanName)
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
	plan, err := os.ReadFile(filepath.Join(r.WorkRoot, "runs", "T8", res.PlanName, "plan.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(plan), "REDISPATCH")
}

// A worker SIGKILLed during a phase and started again: the workflow ends
// with the same brief as an undisturbed run, no log entry lost or doubled,
// and the conductor is not started again.
func TestWorkerKilledDuringPhase(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	r.Workspace("T5")
	run := r.Start(testrig.Dispatch(t, "T5", "Add user authentication with JWT. "+testrig.ExampleCosts+" [sim phase=test delay=3s]"))
	r.WaitPhase("T5", "test")
	before, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.Len(t, before, 1)

	require.NoError(t, r.KillWorker())
	require.True(t, proc.GroupAlive(before[0].PGID), "the conductor outlives the worker")
	time.Sleep(500 * time.Millisecond) // let the conductor write while no worker runs
	r.StartWorker()

	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, testrig.ExampleBriefFor(t, "T5", res.PlanName), r.FileBrief("T5"))
	require.Len(t, res.Brief.Log, 8, "one log entry per event, none lost or doubled")

	after, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.Len(t, after, 1)
	require.Equal(t, before[0].PID, after[0].PID, "conductor not started again")
	var starts int
	for _, ev := range r.Events("T5", res.PlanName) {
		if ev["type"] == "plan_start" {
			starts++
		}
	}
	require.Equal(t, 1, starts, "one conductor run wrote the whole log")
}

// A second start for a task whose workflow runs is refused clearly.
func TestDuplicateStartRefused(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	r.Workspace("T9")
	run := r.Start(testrig.Dispatch(t, "T9", "Long. [sim phase=implement hang=forever]"))
	r.WaitPhase("T9", "implement")
	starter, err := devenv.Binary("starter")
	require.NoError(t, err)
	path := filepath.Join(r.Dir, "t9.json")
	require.NoError(t, os.WriteFile(path, testrig.MustJSON(t, testrig.Dispatch(t, "T9", "again")), 0o644))
	out, err := runCmd(starter, "start", "-address", r.Server.Addr, "-task-queue", r.Queue, path)
	require.Error(t, err)
	require.Contains(t, out, "task T9 already has a running workflow")

	out, err = runCmd(starter, "abort", "-address", r.Server.Addr, "T9")
	require.NoError(t, err, out)
	res := r.Result(run)
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	require.Equal(t, 1, countHandles(t, r.WorkRoot), "the refused start spawned nothing")
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
