//go:build realserver

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// A long event stream makes the workflow continue-as-new several times on a
// real server (checkpoints every 100 ms, a new run every 4 of them): the
// running conductor is carried, not restarted, and every event reaches the
// brief exactly once.
func TestContinueAsNewOnLongRun(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	r.Workspace("T11")
	d := testrig.Dispatch(t, "T11", "Chatty agent. [sim phase=implement events=300 delay=6s]")
	run := r.StartInput(taskapi.TaskInput{Dispatch: d, Tuning: &taskapi.Tuning{
		ContinueAsNewAfterPolls: 4, CheckpointEvery: 100 * time.Millisecond}})
	// run.Get follows the chain of continued runs to the last one.
	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)

	st, err := r.Status("T11")
	require.NoError(t, err)
	require.Positive(t, st.ContinuedAsNew, "the run must have continued as new")

	events := r.Events("T11", res.PlanName)
	require.Equal(t, len(events), st.EventsApplied, "every event applied exactly once across runs")
	require.Len(t, res.Brief.Log, len(events), "one log entry per event")
	hs, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.Len(t, hs, 1, "one conductor for the attempt")
	starts := 0
	for _, ev := range events {
		if ev["type"] == "plan_start" {
			starts++
		}
	}
	require.Equal(t, 1, starts)
	t.Logf("%d events over %d continue-as-new runs", len(events), st.ContinuedAsNew+1)
}
