package activities

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/internal/metrics"
	"karvi-edda-temporal/internal/notify"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/limits"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/stalls"
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

// Config is the worker-side configuration of the activities. Nothing here
// comes from workflow input: secrets and paths belong to the operator.
type Config struct {
	// WorkRoot holds every task's work directory and run records; nothing
	// this worker writes may land outside it.
	WorkRoot string
	// Conductor is the edda binary (or the simulator): it is run as
	// `<Conductor> conduct run <plan> --cwd <dir> --json`.
	Conductor string
	// ConductorEnv is added to the conductor's environment.
	ConductorEnv []string
	Templates    mapping.TemplateSet
	// StopGrace is how long a stopped conductor gets between TERM and KILL.
	StopGrace time.Duration
	// TailLinger batches a burst of lines into one result.
	TailLinger time.Duration
	// TailPoll is the fallback poll interval when file notifications are missed.
	TailPoll time.Duration
	// EventsDir holds the tasks' canonical event streams, one
	// <run_id>.jsonl each; empty means DefaultEventsDir(WorkRoot).
	EventsDir string
	// Host names this worker's machine in a fleet (internal/fleet): an
	// attempt it starts says so, and the attempt's later activities come
	// to this host's own queue. Empty for none.
	Host string
	// Limits recognises a usage limit in the agents' transcripts; nil
	// uses the built-in patterns (limits.Default).
	Limits *limits.Detector
	// StallAfter is the stall threshold of a task whose dispatch sets none
	// (zero: none; it applies only where it is shorter than the phase
	// timeout), OnStall its action ("" warns): the worker's -stall-after
	// and -on-stall (stall.go).
	StallAfter time.Duration
	OnStall    stalls.Action
}

// Activities are the side effects of TaskWorkflow. Register one value with
// the worker; the workflow refers to the methods through a nil pointer.
type Activities struct {
	Config Config
	Sink   sink.Sink
	// Metrics records what the tail reads and how many conductors it
	// follows; nil records nothing.
	Metrics *metrics.Recorder
	// Notifier sends events (a task paused, resumed) to a person's
	// webhook; nil sends none.
	Notifier *notify.Notifier

	// plans caches parsed plan.yaml files by path: a plan file never changes
	// once written (its name changes with every attempt).
	plans sync.Map
	// patchProgress: acknowledged patches of a batch being retried (patch.go).
	patchProgress sync.Map // "runID/activityID" -> int
	// streams is the canonical event store, opened on first use (events.go).
	streams streams
}

const (
	maxBatchBytes = 256 << 10
	// maxDrainBytes bounds one result when the conductor has exited, so a
	// huge backlog arrives in several results instead of one oversized
	// history payload.
	maxDrainBytes  = 1 << 20
	heartbeatEvery = time.Second
	sampleLen      = 200
	logTailBytes   = 2048
)

// heartbeat records a heartbeat now and then every interval until stopped,
// so the server notices a dead worker within the heartbeat timeout and the
// activity learns of its cancellation.
func heartbeat(ctx context.Context, every time.Duration) func() {
	activity.RecordHeartbeat(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
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

func invalidDispatch(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidDispatch, err)
}
