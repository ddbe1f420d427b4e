package runflow

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/flowkit"
)

// The run workflow's timeouts and retry policies, in one place, as in
// each wing (options.go).

// runStatusOptions: status.json is a local write; a full disk is retried
// until it clears rather than losing the document.
func runStatusOptions(ctx workflow.Context, doc runstatus.Status) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		Summary:                fmt.Sprintf("Write status.json: run %s", doc.Status),
		ScheduleToCloseTimeout: flowkit.RetryFor,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{runact.ErrBadRunStatus},
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
