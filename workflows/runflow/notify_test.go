package runflow

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/runflow/runapi"
)

// A run that ends tells the webhook once, with its tasks counted and
// those that need a person named; its tasks' own ends are the run's.
func TestRunEndedNotifiesOnceWithCounts(t *testing.T) {
	f := &fakeTasks{fail: map[string]bool{"e": true}}
	env, _ := runEnv(t, f)
	var mu sync.Mutex
	var notes []taskact.NotifyRequest
	var notifier *taskact.Activities // the webhook's activity, as flowkit queues it
	env.RegisterActivity(notifier)
	env.OnActivity(notifier.Notify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.NotifyRequest) error {
			mu.Lock()
			defer mu.Unlock()
			notes = append(notes, req)
			return nil
		})
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun)})
	doc := runResult(t, env)
	require.Equal(t, runstatus.RunPartial, doc.Status)
	require.Len(t, notes, 1, "notes: %+v", notes)
	n := notes[0]
	require.Equal(t, "run_ended", n.Kind)
	require.Equal(t, "diamond", n.RunID)
	require.Contains(t, n.ID, "-run_ended-")
	require.Equal(t, "partial", n.Details["status"])
	require.Equal(t, "4", n.Details["done"])
	require.Equal(t, "1", n.Details["failed"])
	require.Equal(t, "e", n.Details["need_a_person"])
	require.Equal(t, "run diamond ended partial: 1 failed, 4 done", n.Reason)
}
