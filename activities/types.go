package activities

import (
	"time"

	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
)

// Error types that the workflow and the retry policies match on. They are
// ApplicationError types, so they survive the trip through Temporal.
const (
	// ErrInvalidDispatch: the DispatchPlan (or the template it selects) cannot
	// produce a valid plan. Retrying cannot help.
	ErrInvalidDispatch = "InvalidDispatch"
	// ErrConductorStart: the conductor command could not be started at all
	// (missing binary, unusable work directory).
	ErrConductorStart = "ConductorStart"
	// ErrNoBrief: karvi has no brief for this task (404). The run goes on and
	// the brief stays queryable in the workflow.
	ErrNoBrief = "NoBrief"
	// ErrSinkRejected: the sink refused the write for a reason a retry cannot
	// fix (illegal status transition, bad request, unauthorized).
	ErrSinkRejected = "SinkRejected"
)

// PrepareRequest asks for the plan of one attempt of a task.
type PrepareRequest struct {
	Dispatch mapping.DispatchPlan `json:"dispatch"`
	Attempt  int                  `json:"attempt"`
}

// PlanInfo is what the workflow keeps about a generated plan: where things
// live on disk and the plan's shape. The plan text itself stays on disk.
type PlanInfo struct {
	Summary    mapping.PlanSummary `json:"summary"`
	PlanPath   string              `json:"planPath"`
	Cwd        string              `json:"cwd"`
	RunDir     string              `json:"runDir"`
	EventsPath string              `json:"eventsPath"`
	StatePath  string              `json:"statePath"`
}

// StartRequest starts (or re-attaches to) the conductor for one plan.
type StartRequest struct {
	Plan PlanInfo `json:"plan"`
}

// TailRequest asks for the event lines after Cursor, waiting at most MaxWait.
type TailRequest struct {
	Plan    PlanInfo      `json:"plan"`
	Handle  proc.Handle   `json:"handle"`
	Cursor  tailer.Cursor `json:"cursor"`
	MaxWait time.Duration `json:"maxWait"`
}

// TailResult carries parsed, redacted events and what is known about the
// conductor process. When Exited is set the log has been read to its end.
type TailResult struct {
	Events    []mapping.Event `json:"events,omitempty"`
	Next      tailer.Cursor   `json:"next"`
	Malformed int             `json:"malformed,omitempty"`
	// MalformedSample is the (redacted, shortened) text of the last malformed
	// line in this batch, so a person can see what the conductor wrote.
	MalformedSample string `json:"malformedSample,omitempty"`
	Truncated       bool   `json:"truncated,omitempty"`
	Missing         bool   `json:"missing,omitempty"`

	Exited   bool `json:"exited,omitempty"`
	ExitCode int  `json:"exitCode,omitempty"`
	// State is the conductor's state.json once it has exited; StateError says
	// why it could not be read when it is nil.
	State      *mapping.ConductorState `json:"state,omitempty"`
	StateError string                  `json:"stateError,omitempty"`
	// LogTail is the end of the conductor's own output (redacted): the only
	// place some outcomes (budget, max turns) are explained.
	LogTail string `json:"logTail,omitempty"`
}

// PatchRequest sends brief patches, in order, for one task.
type PatchRequest struct {
	TaskID  string          `json:"taskId"`
	Patches []mapping.Patch `json:"patches"`
}

// StatusRequest sets the karvi task status.
type StatusRequest struct {
	TaskID string            `json:"taskId"`
	Update sink.StatusUpdate `json:"update"`
}

// AbortRequest stops a conductor run: `conduct abort` then the process group.
type AbortRequest struct {
	Plan   PlanInfo    `json:"plan"`
	Handle proc.Handle `json:"handle"`
}
