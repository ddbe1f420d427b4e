package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/limits"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/stalls"
)

// ErrInvalidDispatch: the DispatchPlan (or the template it selects), or a
// run's repository settings, cannot produce valid work. Retrying cannot
// help. It is an ApplicationError type, so it survives the trip through
// Temporal, and the retry policies of several wings match on it.
const ErrInvalidDispatch = "InvalidDispatch"

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
	// TailHeartbeat is the heartbeat timeout of a running task's delivering
	// tail: how long the server waits before it gives the delivery of a
	// killed worker to another one. Its heartbeats are the one server cost
	// of a task between phase boundaries (one every 0.8 of it), so a
	// longer one carries more tasks and recovers from a crash later. The
	// tail reports it, and the workflow schedules its next deliveries with
	// it; zero is DefaultTailHeartbeat.
	TailHeartbeat time.Duration
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
	// Account is the agent account of the tasks this worker claims a
	// host for that name no account and no slot pool (the worker's
	// -account, by default one per task queue); empty for none.
	Account string
	// Scale divides the activities' own periods (a stall's recheck, the
	// checkpoint cadence a workflow leaves to the tail, an account's
	// shared read): the worker's -time-scale; zero is real time.
	Scale timescale.Scale
}

// DefaultTailHeartbeat is Config.TailHeartbeat when unset.
const DefaultTailHeartbeat = time.Minute

// MinScaledTailHeartbeat is the least a time scale makes of the tail's
// heartbeat timeout: a few heartbeats (HeartbeatEvery), so that one late
// heartbeat does not fail a live delivery.
const MinScaledTailHeartbeat = 5 * HeartbeatEvery

// TailHeartbeatOrDefault is c.TailHeartbeat, or its default at c.Scale
// when unset.
func (c Config) TailHeartbeatOrDefault() time.Duration {
	if c.TailHeartbeat > 0 {
		return c.TailHeartbeat
	}
	return ScaledTailHeartbeat(c.Scale)
}

// ScaledTailHeartbeat is DefaultTailHeartbeat at scale s.
func ScaledTailHeartbeat(s timescale.Scale) time.Duration {
	if !s.Scaled() {
		return DefaultTailHeartbeat
	}
	return max(s.Of(DefaultTailHeartbeat), MinScaledTailHeartbeat)
}

// HeartbeatEvery is how often a long activity heartbeats.
const HeartbeatEvery = time.Second

// Heartbeat records a heartbeat now and then every interval until stopped,
// so the server notices a dead worker within the heartbeat timeout and the
// activity learns of its cancellation.
func Heartbeat(ctx context.Context, every time.Duration) func() {
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

// InvalidDispatch marks err as an ErrInvalidDispatch, not to be retried.
func InvalidDispatch(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidDispatch, err)
}
