package flowkit

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/task"
)

// NotifyOn reports whether this workflow sends the notifications of
// versionNotifyEnds. It is asked only where one is about to be sent, so
// a workflow that never sends one records no marker.
func NotifyOn(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionNotifyEnds, workflow.DefaultVersion, 1) >= 1
}

// QueueNotification hands one event to the worker's webhook notifier.
func QueueNotification(ctx workflow.Context, req taskapi.NotifyRequest) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		Summary: req.Kind + " notification", StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{"BadNotification"}},
	})
	if err := workflow.ExecuteLocalActivity(lctx, taskapi.ActivityNotify, req).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("notification not queued", "kind", req.Kind, "error", err)
	}
}
