package faults

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/devenv"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows"
)

// Fault 2: the Temporal dev server is restarted twice mid-run on its
// persistent database file, once while the workflow waits in a phase and
// once as the conductor enters its last phase (wherever the workflow then
// is). The worker and the conductor keep running; the workflow must resume
// from the stored history and end with the brief of an undisturbed run.
// The shared server is not restarted: this test brings its own.
func TestServerRestartMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite: needs the dev server (run without -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := devenv.StartServer(ctx, devenv.ServerOptions{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() }) // after the rig's cleanup, which needs it

	r := newRig(t, rigOptions{sink: "karvi", server: srv})
	const id = "RESTART1"
	plan := mapping.PlanName(id, 1)
	r.workspace(id)
	run := r.start(dispatch(t, id, seedMessage(800, 2500, 2500, "")))
	wfID := workflows.WorkflowID(id)

	r.waitPhase(id, "test")
	require.NoError(t, srv.Restart(ctx), "first restart")
	desc, err := r.cl.DescribeWorkflowExecution(ctx, wfID, "")
	require.NoError(t, err, "the workflow survived the restart")
	require.Equal(t, run.GetRunID(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())

	// The second restart waits for the conductor, not the workflow, so it
	// lands wherever the workflow happens to be after the first.
	for !hasEvent(r.eventsPath(id, plan), "phase_start", "docs") {
		require.NoError(t, ctx.Err(), "conductor never reached docs")
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, srv.Restart(ctx), "second restart")

	res := r.result(run)
	require.Equal(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, seedBriefFor(t, id, plan), r.karviBrief(id), "brief equals an undisturbed run's")
	logPerEvent(t, r.karviBrief(id), r.singleRun(id, plan))
	require.Equal(t, "completed", r.karviStatus(id))
	// No order assertion here: a workflow task whose completion the
	// restart swallowed is replayed, and its patch batch goes again whole
	// (at least once; the brief converges, as checked above).
	t.Logf("2 server restarts; PATCHes accepted, by log length: %v", logLengths(t, r.karviPatches(id)))
	r.assertNoOrphans()
	require.NoError(t, replay(r.history(id)), "history across restarts replays")
}
