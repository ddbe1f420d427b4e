//go:build realserver

package faults

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// The Temporal dev server is restarted twice mid-run on its persistent
// database file, once while the workflow waits in a phase and once as the
// conductor enters its last phase (wherever the workflow then is). The
// worker and the conductor keep running; the workflow must resume from the
// stored history and end with the brief of an undisturbed run. The shared
// server is not restarted: this test brings its own.
func TestServerRestartMidRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := devenv.StartServer(ctx, devenv.ServerOptions{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() }) // after the rig's cleanup, which needs it

	r := newRig(t, testrig.Options{Sink: "karvi", Server: srv})
	const id = "RESTART1"
	r.Workspace(id)
	run := r.Start(testrig.Dispatch(t, id, exampleMessage(800, 2500, 2500, "")))
	wfID := taskapi.WorkflowID(id)

	r.WaitPhase(id, "test")
	plan := r.PlanName(id, 1) // its run directory exists now
	require.NoError(t, srv.Restart(ctx), "first restart")
	desc, err := r.Client.DescribeWorkflowExecution(ctx, wfID, "")
	require.NoError(t, err, "the workflow survived the restart")
	require.Equal(t, run.GetRunID(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())

	// The second restart waits for the conductor, not the workflow, so it
	// lands wherever the workflow happens to be after the first.
	dl, _ := ctx.Deadline()
	wait.EventuallyEvery(t, time.Until(dl), 20*time.Millisecond, "the conductor to reach docs", func() (any, bool) {
		return "no phase_start of docs in " + r.EventsPath(id, plan), hasEvent(r.EventsPath(id, plan), "phase_start", "docs")
	})
	require.NoError(t, srv.Restart(ctx), "second restart")

	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, testrig.ExampleBriefFor(t, id, plan), r.KarviBrief(id), "brief equals an undisturbed run's")
	logPerEvent(t, r.KarviBrief(id), r.singleRun(id, plan))
	require.Equal(t, "completed", r.KarviStatus(id))
	// No order assertion here: a workflow task whose completion the
	// restart swallowed is replayed, and its patch batch goes again whole
	// (at least once; the brief converges, as checked above).
	t.Logf("2 server restarts; PATCHes accepted, by log length: %v", logLengths(t, r.KarviPatches(id)))
	r.AssertNoOrphans()
	require.NoError(t, testrig.Replay(r.History(id)), "history across restarts replays")
}
