package taskact

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/notify"
)

// NotifyRequest is taskapi's: the run workflows send it too.
type NotifyRequest = taskapi.NotifyRequest

// Notify queues the event for the webhook and returns at once: the
// notifier delivers it in the background, with retries, and keeps what it
// cannot deliver in its dead-letter file, so nothing here waits on the
// receiver. A worker without a webhook does nothing.
func (a *Activities) Notify(_ context.Context, req NotifyRequest) error {
	if a.Notifier == nil {
		return nil
	}
	ev := notify.Event{ID: req.ID, Kind: notify.Kind(req.Kind), Time: req.Time, TaskID: req.TaskID,
		RunID: req.RunID, Host: a.Config.Host, Reason: req.Reason}
	if req.Host != "" {
		ev.Host = req.Host
	}
	if !req.ResetAt.IsZero() {
		r := req.ResetAt
		ev.ResetAt = &r
	}
	if len(req.Details) > 0 {
		ev.Details = make(map[string]any, len(req.Details))
		for k, v := range req.Details {
			ev.Details[k] = v
		}
	}
	err := a.Notifier.Notify(ev)
	if errors.Is(err, notify.ErrClosed) {
		return nil // the worker is stopping: the event is in the dead-letter file
	}
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("notify %s: %v", req.Kind, err), "BadNotification", err)
	}
	return nil
}
