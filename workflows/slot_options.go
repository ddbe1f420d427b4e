package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
)

// The timeouts and retry policies of agent slots, in one place like the
// task's (options.go).

// acquireSlotOptions: the acquire update is answered at once, so a call
// that takes long is a server or worker in trouble: retry until it gets
// through. The limit is short because it is also how long a task waits
// after its worker died mid-call (the call does not heartbeat). The
// update's id makes a retry harmless. A request the pool refuses as
// malformed is final.
func acquireSlotOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrBadSlotRequest},
		},
	})
}

// checkHoldersOptions: a check describes each holder's workflow; it
// heartbeats between them. A check that keeps failing gives up, and the
// next one comes at the pool's next interval.
func checkHoldersOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
			MaximumAttempts:    3,
		},
	})
}
