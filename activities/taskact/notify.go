package taskact

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/internal/notify"
)

// NotifyRequest is one event for the person who watches the tasks (the
// webhook, internal/notify).
type NotifyRequest struct {
	// ID is the delivery id: the same on every retry, so a receiver acts
	// on the event once.
	ID     string    `json:"id"`
	Kind   string    `json:"kind"`
	Time   time.Time `json:"time"`
	TaskID string    `json:"taskId,omitempty"`
	// RunID is the run (its slug) the event is about, if any.
	RunID string `json:"runId,omitempty"`
	// Host is the host the event is about (the one lost); "" names the
	// worker's own.
	Host    string            `json:"host,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	ResetAt time.Time         `json:"resetAt,omitzero"`
	Details map[string]string `json:"details,omitempty"`
}

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
