package flowkit

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// RetryFor bounds the retries of a write that must land (a batch of brief
// patches, a run's status.json): a month is "as long as it takes" in
// practice, so an outage of karvi or a full disk delays the write instead
// of losing it.
const RetryFor = 30 * 24 * time.Hour

// AwaitOptions: waiting for a workflow (a run's task, an intent's target)
// takes as long as that workflow; the heartbeat lets a dead worker's wait
// resume on another.
func AwaitOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 30 * 24 * time.Hour,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}
