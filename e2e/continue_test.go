package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/internal/devenv"
	"karvi-edda-temporal/workflows"
)

// A long event stream makes the workflow continue-as-new several times on a
// real server: the running conductor is carried, not restarted, and every
// event reaches the brief exactly once.
func TestContinueAsNewOnLongRun(t *testing.T) {
	r := newRig(t, rigOptions{})
	work := r.workspace("T11")
	d := dispatch(t, "T11", "Chatty agent. [sim phase=implement events=150 delay=1500ms]")
	run, err := r.cl.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: workflows.WorkflowID("T11"), TaskQueue: r.queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}, workflows.TaskWorkflowName, workflows.TaskInput{Dispatch: d,
		Tuning: &workflows.Tuning{ContinueAsNewAfterPolls: 4}})
	require.NoError(t, err)
	// run.Get follows the chain of continued runs to the last one.
	res := r.result(run)
	require.Equal(t, "completed", res.Outcome.TaskStatus)

	st, err := r.status("T11")
	require.NoError(t, err)
	require.Positive(t, st.ContinuedAsNew, "the run must have continued as new")

	events := eventsOf(t, work, res.PlanName)
	require.Equal(t, len(events), st.EventsApplied, "every event applied exactly once across runs")
	require.Len(t, res.Brief.Log, len(events), "one log entry per event")
	hs, err := devenv.Handles(r.workRoot)
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
