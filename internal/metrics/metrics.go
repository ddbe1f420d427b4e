package metrics

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"karvi-edda-temporal/mapping"
)

// The instruments' names.
const (
	// ConductorsRunning: conductors whose event log a delivering tail on
	// this worker follows right now (an up-down counter, a gauge once
	// exported).
	ConductorsRunning = "karvi_edda_conductors_running"
	// EventsRead: event lines read and parsed, by type.
	EventsRead = "karvi_edda_conductor_events_read"
	// MalformedLines: event lines refused (not JSON, no type, too long).
	MalformedLines = "karvi_edda_malformed_event_lines"
	// BriefPatchDuration: the round trip of one acknowledged brief PATCH,
	// from the call to the sink to its answer, in seconds.
	BriefPatchDuration = "karvi_edda_brief_patch_duration"
	// SinkErrors: failed sink calls, by op and kind.
	SinkErrors = "karvi_edda_sink_errors"
	// AttemptsStarted and AttemptsEnded count a task's attempts, the
	// second by outcome; the workflow records them (see AttemptStarted).
	AttemptsStarted = "karvi_edda_attempts_started"
	AttemptsEnded   = "karvi_edda_attempts_ended"
	// PhaseStalls counts the phases that stalled, by action; the workflow
	// records them (see Stalled).
	PhaseStalls = "karvi_edda_phase_stalls"
	// SlotsHeld, SlotsWaiting and SlotsMax are an agent slot pool's
	// holders, waiters and max_concurrent, by pool; the pool's workflow
	// records them (see Pool).
	SlotsHeld    = "karvi_edda_slots_held"
	SlotsWaiting = "karvi_edda_slots_waiting"
	SlotsMax     = "karvi_edda_slots_max_concurrent"
	// IntakeKarviUnreachable and IntakeKarviUnauthorized are 1 while the
	// karvi intake of a board cannot read it (karvi down, or its board
	// unreadable) or karvi refuses its token (401/403), 0 otherwise, by
	// board; IntakeKarviProblems counts each time such a problem begins,
	// by board and kind. The intake workflow records them (see
	// IntakeKarvi).
	IntakeKarviUnreachable  = "karvi_edda_intake_karvi_unreachable"
	IntakeKarviUnauthorized = "karvi_edda_intake_karvi_unauthorized"
	IntakeKarviProblems     = "karvi_edda_intake_karvi_problems"
)

// LatencyBuckets are the bucket bounds, in seconds, of every duration
// histogram the worker exports, its own and the SDK's: from a PATCH to a
// local karvi (about a millisecond) to a workflow that runs for an hour.
var LatencyBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
}

// knownEvents are the event types that get a label of their own: the
// conductor's, including the gate events newer versions write. Anything
// else a conductor may invent counts as "other", so a label's values stay
// few whatever the log holds.
var knownEvents = []string{
	mapping.EventPlanStart, mapping.EventPhaseStart, mapping.EventPhasePassed,
	mapping.EventPhaseFailed, mapping.EventPhaseSkipped, mapping.EventPlanCompleted,
	mapping.EventPlanAborted,
	"gate_entered", "verdict_received", "gate_timed_out", "gate_waived",
}

// otherEvent labels every event type outside knownEvents.
const otherEvent = "other"

// Recorder records the worker's own metrics. Its methods do nothing on a
// nil *Recorder: that is how metrics are off.
type Recorder struct {
	conductors metric.Int64UpDownCounter
	// Gauges of what this worker holds belong beside conductors, moved up
	// and down by a pair like WatchConductor's; the run slots a worker
	// holds are the one expected next.
	events     metric.Int64Counter
	malformed  metric.Int64Counter
	patch      metric.Float64Histogram
	sinkErrors metric.Int64Counter

	// eventAttrs holds each event label's attribute set, made once: the
	// tail records every line it reads.
	eventAttrs map[string]metric.AddOption
}

// New creates the instruments on mp, once for the worker's life.
func New(mp metric.MeterProvider) (*Recorder, error) {
	m := mp.Meter("karvi-edda-temporal")
	r := &Recorder{eventAttrs: map[string]metric.AddOption{}}
	var err error
	if r.conductors, err = m.Int64UpDownCounter(ConductorsRunning,
		metric.WithDescription("Conductors whose event log a delivering tail on this worker is following.")); err != nil {
		return nil, fmt.Errorf("metric %s: %w", ConductorsRunning, err)
	}
	if r.events, err = m.Int64Counter(EventsRead,
		metric.WithDescription("Conductor event lines read and parsed, by event type (unknown types as other).")); err != nil {
		return nil, fmt.Errorf("metric %s: %w", EventsRead, err)
	}
	if r.malformed, err = m.Int64Counter(MalformedLines,
		metric.WithDescription("Conductor event lines refused as malformed (not JSON, no type, too long).")); err != nil {
		return nil, fmt.Errorf("metric %s: %w", MalformedLines, err)
	}
	if r.patch, err = m.Float64Histogram(BriefPatchDuration, metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(LatencyBuckets...),
		metric.WithDescription("Round trip of an acknowledged brief PATCH: the call to the sink until its answer.")); err != nil {
		return nil, fmt.Errorf("metric %s: %w", BriefPatchDuration, err)
	}
	if r.sinkErrors, err = m.Int64Counter(SinkErrors,
		metric.WithDescription("Failed sink calls, by op (patch_brief, set_status, read_brief) and kind.")); err != nil {
		return nil, fmt.Errorf("metric %s: %w", SinkErrors, err)
	}
	for _, t := range append(knownEvents, otherEvent) {
		r.eventAttrs[t] = metric.WithAttributeSet(attribute.NewSet(attribute.String("type", t)))
	}
	return r, nil
}

// WatchConductor counts a conductor as running until the returned function
// is called: `defer rec.WatchConductor()()` around a tail that follows it.
func (r *Recorder) WatchConductor() (done func()) {
	if r == nil {
		return func() {}
	}
	r.conductors.Add(context.Background(), 1)
	return func() { r.conductors.Add(context.Background(), -1) }
}

// Read counts a batch the tail read: its events by type, and the lines it
// refused as malformed.
func (r *Recorder) Read(evs []mapping.Event, malformed int) {
	if r == nil {
		return
	}
	ctx := context.Background()
	for _, ev := range evs {
		attrs, ok := r.eventAttrs[ev.Type]
		if !ok {
			attrs = r.eventAttrs[otherEvent]
		}
		r.events.Add(ctx, 1, attrs)
	}
	if malformed > 0 {
		r.malformed.Add(ctx, int64(malformed))
	}
}
