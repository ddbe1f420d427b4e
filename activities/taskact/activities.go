package taskact

import (
	"strings"
	"sync"
	"unicode/utf8"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/internal/metrics"
	"karvi-edda-temporal/internal/notify"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tracing"
)

// Error types that the workflow and the retry policies match on. They are
// ApplicationError types, so they survive the trip through Temporal.
const (
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

const (
	maxBatchBytes = 256 << 10
	// maxDrainBytes bounds one result when the conductor has exited, so a
	// huge backlog arrives in several results instead of one oversized
	// history payload.
	maxDrainBytes = 1 << 20
	sampleLen     = 200
	logTailBytes  = 2048
)

// Activities are the side effects of TaskWorkflow. Register one value with
// the worker; the workflow refers to the methods through a nil pointer.
type Activities struct {
	Config activities.Config
	Sink   sink.Sink
	// Metrics records what the tail reads and how many conductors it
	// follows; nil records nothing.
	Metrics *metrics.Recorder
	// Notifier sends events (a task paused, resumed) to a person's
	// webhook; nil sends none.
	Notifier *notify.Notifier
	// Accounts joins a task that names no agent account to the worker's
	// (Config.Account) when it claims its host; nil joins none.
	Accounts *accountapi.Joins
	// Traces exports the task's spans (traces.go); nil exports none.
	Traces *tracing.Emitter

	// plans caches parsed plan.yaml files by path: a plan file never changes
	// once written (its name changes with every attempt).
	plans sync.Map
	// patchProgress: acknowledged patches of a batch being retried (patch.go).
	patchProgress sync.Map // "runID/activityID" -> int
	// streams is the canonical event store, opened on first use (events.go).
	streams activities.Streams
}

func shorten(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\\0")
	if len(s) <= sampleLen {
		return s
	}
	cut := sampleLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
