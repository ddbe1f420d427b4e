package taskflow

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
)

// A task that ends blocked tells the webhook once, with the blocker, after
// its pauses were told.
func TestBlockedTaskNotifiesOnce(t *testing.T) {
	env, c := newLimited(t)
	c.limitAgain = true
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Tuning: &taskapi.Tuning{MaxPauses: 1, PauseWait: time.Minute}})
	require.NoError(t, env.GetWorkflowError())
	var blocked []taskact.NotifyRequest
	for _, n := range c.notes {
		if n.Kind == "blocked" {
			blocked = append(blocked, n)
		}
	}
	require.Len(t, blocked, 1, "notes: %+v", c.notes)
	require.Equal(t, "paused", c.notes[0].Kind)
	b := blocked[0]
	require.Equal(t, exampleDispatch(t).TaskID, b.TaskID)
	require.True(t, strings.HasSuffix(b.ID, "-blocked-1"), b.ID)
	require.Contains(t, b.Reason, "usage limit 2 times")
	require.Equal(t, "1", b.Details["attempt"])
}

// A host the fleet gives up on is told once, naming the lost host, not
// the worker that noticed.
func TestLostHostNotifiesOnce(t *testing.T) {
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
	require.Len(t, notes, 1, "notes: %+v", notes)
	n := notes[0]
	require.Equal(t, "host_lost", n.Kind)
	require.Equal(t, "h2", n.Host)
	require.Equal(t, "T5", n.TaskID)
	require.True(t, strings.HasSuffix(n.ID, "-host_lost-1"), n.ID)
	require.Equal(t, "host h2 lost during phase implement", n.Reason)
}
