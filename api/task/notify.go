package taskapi

import "time"

// ActivityNotify is the task wing's local activity the workflows of every
// wing (a task's, a run's) hand their notifications to, by name: the
// method's the worker registers (taskact.Activities.Notify). It takes a
// NotifyRequest. It never changes.
const ActivityNotify = "Notify"

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
