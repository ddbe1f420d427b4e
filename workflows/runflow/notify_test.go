package runflow

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/runstatus"
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

// A run its budget pauses tells the webhook once that it waits for a
// person, with the run's slug and the note that says how to go on.
func TestRunBudgetPauseNotifiesOnce(t *testing.T) {
	f := &fakeTasks{}
	env, _ := runEnv(t, f)
	var mu sync.Mutex
	var notes []taskact.NotifyRequest
	var notifier *taskact.Activities
	env.RegisterActivity(notifier)
	env.OnActivity(notifier.Notify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.NotifyRequest) error {
			mu.Lock()
			defer mu.Unlock()
			notes = append(notes, req)
			return nil
		})
	var answers []string
	update(env, 8*time.Minute, runapi.UpdateBudget, &answers, runapi.BudgetRequest{LimitUSD: 5})
	budget := costs.Budget{LimitUSD: 0.4, Action: costs.Pause}
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun), Budget: &budget})
	require.Equal(t, runstatus.RunComplete, runResult(t, env).Status)
	var kinds []string
	for _, n := range notes {
		kinds = append(kinds, n.Kind)
	}
	require.Equal(t, []string{"paused", "run_ended"}, kinds, "notes: %+v", notes)
	p := notes[0]
	require.Equal(t, "diamond", p.RunID)
	require.Equal(t, "budget", p.Details["paused_reason"])
	require.Equal(t, pausedNote, p.Reason)
	require.Contains(t, p.ID, "-run_paused-")
}
