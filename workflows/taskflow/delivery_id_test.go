package taskflow

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/stalls"
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

// The stall's and the lost host's delivery ids carry the chain's nonce
// too.
func TestStallAndHostLostIDsCarryTheChainsNonce(t *testing.T) {
	withChains(t)
	c, _, _ := runStalling(t, stalls.Warn, nil)
	stalled := c.notesOf("stalled")
	require.Len(t, stalled, 1)
	require.Equal(t, "default-test-workflow-id-"+testNonce()+"-stalled-1", stalled[0].ID)

	env := newEnv(t)
	q := watchQueues(env)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 2,
		hostOf: func(n int) string { return map[int]string{1: "h2", 2: "h1"}[n] }}
	f.gone = lostHost(func() string { return q.shared }, "h2")
	f.register(env)
	var mu sync.Mutex
	var notes []taskact.NotifyRequest
	env.OnActivity(acts.Notify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.NotifyRequest) error {
			mu.Lock()
			defer mu.Unlock()
			notes = append(notes, req)
			return nil
		})
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, notes, 1)
	require.Equal(t, "default-test-workflow-id-"+testNonce()+"-host_lost-1", notes[0].ID)
}
