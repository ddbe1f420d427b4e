package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/runstatus"
)

// The run workflow's timeouts and retry policies, in one place like the
// task's (options.go).

// runStatusOptions: status.json is a local write; a full disk is retried
// until it clears rather than losing the document.
func runStatusOptions(ctx workflow.Context, doc runstatus.Status) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		Summary:                fmt.Sprintf("Write status.json: run %s", doc.Status),
		ScheduleToCloseTimeout: patchRetryFor,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrBadRunStatus},
		},
	})
}

// awaitOptions: waiting for a workflow (a run's task, an intent's target)
// takes as long as that workflow; the heartbeat lets a dead worker's wait
// resume on another.
func awaitOptions(ctx workflow.Context, summary string) workflow.Context {
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

// gitOptions: worktree and merge steps are quick, local and idempotent.
func gitOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        10,
			NonRetryableErrorTypes: []string{activities.ErrInvalidDispatch},
		},
	})
}
