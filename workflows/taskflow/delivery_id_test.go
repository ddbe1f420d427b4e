package taskflow

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows/taskflow/taskapi"
)

// Every new workflow of a task (a run's next loop, a redispatch after the
// last one ended, a send-back, a schedule's fire) has the same workflow id
// and counts its pauses, stalls and attempts from the start again. The
// webhook's delivery ids still never repeat: a receiver that skips ids it
// has seen would drop the later workflow's events.
func TestDeliveryIDsDifferAcrossWorkflowsOfATask(t *testing.T) {
	prev := firstRunID
	t.Cleanup(func() { firstRunID = prev })
	ids := map[string][]string{}
	chains := []string{"first-run-a", "first-run-b"}
	for _, first := range chains {
		firstRunID = func(*workflow.Info) string { return first }
		env, c := newLimited(t)
		c.limitAgain = true
		env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t),
			Tuning: &taskapi.Tuning{MaxPauses: 1, PauseWait: time.Minute}})
		require.NoError(t, env.GetWorkflowError())
		var kinds []string
		for _, n := range c.notes {
			kinds = append(kinds, n.Kind)
			ids[first] = append(ids[first], n.ID)
		}
		require.Equal(t, []string{"paused", "resumed", "blocked"}, kinds)
	}
	for _, id := range ids[chains[1]] {
		require.NotContains(t, ids[chains[0]], id, "a delivery id of the first workflow again in the second")
	}
	for _, first := range chains {
		nonce := mapping.AttemptNonce("default-test-workflow-id", first)
		for _, id := range ids[first] {
			require.True(t, strings.HasPrefix(id, "default-test-workflow-id-"+nonce+"-"), "the chain's nonce in %s", id)
		}
	}
}
