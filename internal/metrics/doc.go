// Package metrics is the worker's own metrics, beside the ones the Temporal
// SDK reports about itself.
//
// Two kinds, recorded two ways:
//
//   - What the worker's side effects do (conductors watched, event lines
//     read or refused, brief PATCH round trips, sink failures) goes to a
//     Recorder, whose instruments are created once on an OpenTelemetry
//     MeterProvider. A nil *Recorder records nothing, so activities and their
//     tests need no setup when metrics are off.
//   - What a workflow decides (an attempt started, an attempt ended and how)
//     goes through the SDK's handler (workflow.GetMetricsHandler), which
//     stays silent while a history replays: a recorded decision counted on
//     every replay would count each attempt many times over. AttemptStarted
//     and AttemptEnded take that handler and nothing else, so they are as
//     deterministic as the workflow calling them.
//
// Labels are bounded: event types outside the conductor's known set count
// as "other", sink failures as one of a fixed list of kinds. Task ids and
// plan names never become labels.
//
// The names below are the instruments' names; a Prometheus exporter adds
// the conventional suffixes (_total to counters, _seconds to durations).
package metrics
