package taskapi

import (
	"time"

	"karvi-edda-temporal/canonical"
)

// A task's canonical event stream is read through Temporal, not from the
// worker's disk: a small reader workflow per task, id EventsWorkflowID,
// serves the Update UpdateReadEvents with a page of the stream from a byte
// offset. A client starts it (or joins the one running) with
// update-with-start; it ends by itself once no read came for a while.
// The task workflow's own history is never touched by a read.
const (
	EventsWorkflowName = "TaskEvents"
	UpdateReadEvents   = "read"
	// MaxEventsWait bounds how long one read waits for the next event.
	MaxEventsWait = 30 * time.Second
	// ErrReaderRenewing is the type of the refusal of a read that came
	// while the reader was about to continue as new: read again.
	ErrReaderRenewing = "ReaderRenewing"
)

// EventsWorkflowID is the id of a task's reader workflow.
func EventsWorkflowID(taskID string) string { return "karvi-events-" + taskID }

// StreamRunID is the run id of a task's stream, and the name of its file
// (<events dir>/<run id>.jsonl).
func StreamRunID(taskID string) string { return canonical.RunIDForTask(taskID) }

// EventsInput starts a reader workflow: of a task's stream, or with
// Stream set, of another stream (a run's: canonical.RunIDForRun).
type EventsInput struct {
	TaskID string `json:"taskId,omitempty"`
	Stream string `json:"stream,omitempty"`
}

// StreamOf is the stream the reader serves.
func (in EventsInput) StreamOf() string {
	if in.Stream != "" {
		return in.Stream
	}
	return StreamRunID(in.TaskID)
}

// RunEventsWorkflowID is the id of the reader workflow of a run's stream.
func RunEventsWorkflowID(slug string) string { return "karvi-events-run-" + slug }

// EventsRead asks for the events stored after byte Offset: 0, or the Next
// of the page before. Wait (at most MaxEventsWait) is how long to wait for
// one when there is none yet.
type EventsRead struct {
	Offset   int64         `json:"offset"`
	Wait     time.Duration `json:"wait,omitempty"`
	MaxBytes int           `json:"maxBytes,omitempty"`
}

// EventsPage is a run of whole events, one JSON object per line as stored
// (already redacted), and the offset of the next. Next counts the stored
// bytes, so it is also the size of the JSONL a reader printed so far.
type EventsPage struct {
	Lines []string `json:"lines,omitempty"`
	Next  int64    `json:"next"`
	// Missing: nothing was stored for the task yet.
	Missing bool `json:"missing,omitempty"`
}
