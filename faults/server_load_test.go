//go:build realserver

package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// The Temporal server is killed and started again while 50 tasks run, most
// of them mid-phase: on the suite's external server (`make cluster-test`:
// the PostgreSQL-backed cluster, SIGKILLed) or on a dev server of the
// test's own with a database file (stopped). The worker and the conductors
// keep running. Every task must complete as an undisturbed run would: one
// attempt, one conductor process from its first event to its last, the
// brief of an undisturbed run with one log entry per event.
func TestServerRestartUnderLoadLosesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := testrig.Options{Sink: "karvi"}
	if _, external := devenv.ExternalAddress(); !external {
		srv, err := devenv.StartServer(ctx, devenv.ServerOptions{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Stop() }) // after the rig's cleanup, which needs it
		o.Server = srv
	}
	r := newRig(t, o)

	const n = 50
	ids := make([]string, n)
	runs := make([]client.WorkflowRun, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("SRVLOAD%02d", i)
		r.Workspace(ids[i])
		r.AddKarviTask(ids[i])
	}
	for i, id := range ids {
		runs[i] = r.Start(testrig.Dispatch(t, id, exampleMessage(2000, 20000, 1000, "")))
	}
	// The kill lands once the last task's conductor is in its first phase,
	// so every task is past its start; a 20 s test phase keeps them
	// running through the restart, however slowly 50 start on a loaded machine.
	last := ids[n-1]
	dl, _ := ctx.Deadline()
	wait.EventuallyEvery(t, time.Until(dl), 20*time.Millisecond, "the last task's conductor to start", func() (any, bool) {
		events := r.EventsPath(last, r.PlanName(last, 1))
		return "no phase_start of implement in " + events, hasEvent(events, "phase_start", "implement")
	})
	done := 0
	for _, id := range ids {
		if r.KarviStatus(id) == "completed" {
			done++
		}
	}
	began := time.Now()
	require.NoError(t, r.Server.Restart(ctx), "restart the Temporal server")
	t.Logf("server restarted in %v with %d of %d tasks completed", time.Since(began).Round(time.Millisecond), done, n)

	for i, id := range ids {
		res := r.Result(runs[i])
		plan := res.PlanName
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, "%s", id)
		require.Len(t, res.Attempts, 1, "%s: one attempt, none lost or started twice", id)
		evs := r.singleRun(id, plan)
		require.Equal(t, testrig.ExampleBriefFor(t, id, plan), r.KarviBrief(id), "%s: brief equals an undisturbed run's", id)
		logPerEvent(t, r.KarviBrief(id), evs)
		require.Equal(t, "completed", r.KarviStatus(id), id)
	}
	r.AssertNoOrphans()
}
