package intentflow

import (
	"karvi-edda-temporal/activities/intentact"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The fire workflow's timeouts and retry policies, in one place like the
// task's and the run's (each wing's options.go).

// startTargetOptions: a start is one or two client calls, idempotent
// through the marks it leaves on the target. A target busy with someone
// else's workflow, or a file that no longer reads, is final for this try;
// so is a server that keeps refusing: the fire then counts a failure and
// backs off.
func startTargetOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			MaximumAttempts:        5,
			NonRetryableErrorTypes: []string{intentact.ErrTargetBusy, intentact.ErrBadTarget},
		},
	})
}

// scheduleOptions: reading or pausing the intent's schedule. A pause that
// cannot be made within ten minutes fails the fire, and the schedule's
// pause-on-failure pauses it instead.
func scheduleOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:                summary,
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}
