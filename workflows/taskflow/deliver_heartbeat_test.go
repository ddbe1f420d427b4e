package taskflow

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"karvi-edda-temporal/api/task"
)

// A running task's heartbeats are its one server cost between phase
// boundaries, so its deliveries are scheduled with the heartbeat timeout
// the tail reports of its worker (-tail-heartbeat), not a short fixed one;
// the start, which is short, and the deliveries before any report keep
// the short one.
func TestDeliveriesUseTheHeartbeatTheTailReported(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1,
		tailHeartbeat: 45 * time.Second}
	f.register(env)
	var seen []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		seen = append(seen, info.ActivityType.Name+" "+info.HeartbeatTimeout.String())
	})
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	require.Contains(t, seen, "StartAttempt 5s")
	deliveries := 0
	for _, s := range seen {
		if len(s) > len("DeliverEvents") && s[:len("DeliverEvents")] == "DeliverEvents" {
			deliveries++
			require.Equal(t, "DeliverEvents 45s", s)
		}
	}
	require.Positive(t, deliveries, "activities seen: %v", seen)
}
