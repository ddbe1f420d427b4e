// Package bench measures what the task workflow costs the board: how long a
// conductor event takes to reach karvi's brief, how many events and tasks
// one worker carries, and what a task costs in Temporal history and worker
// memory, side by side with the same work done without Temporal.
//
// `make bench` runs the program in cmd/benchrun against real processes: a
// Temporal dev server (testkit/devenv), the worker binary with the karvi
// sink, the conductor simulator (cmd/eddasim, whose event ts is the
// RFC3339Nano wall-clock time of the write) and karvi-compatible sinks
// (testkit/karvifake, which records each write's arrival time). A PATCH is
// matched to the event it carries by the brief log entry it appends (the
// entry's time is the event's ts and its action the event's type), so
// event-to-PATCH latency is the fake's receipt time minus the event's ts,
// both read from this machine's wall clock.
//
// The comparison loops in this package (Loop) do the same work as the
// worker without Temporal: tail events.jsonl, parse, redact, reduce and
// PATCH each event in order. Run over the same events.jsonl files as the
// workflow, in the same run, they give the floor that durability is
// measured against.
//
// Nothing here decides pass or fail on timing: the tests of this package
// check the matching and the statistics, and the figures only go into the
// report, results.json and BENCHMARKS.md.
package bench
