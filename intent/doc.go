// Package intent is the policy of schedule intents: work that starts
// itself. An intent fires a target (one task's DispatchPlan, or a run file
// of many tasks) once at a time or on a cron in a time zone, until a
// condition holds, max_runs is reached, or its circuit opens after too many
// failed fires in a row.
//
// It holds the rules and nothing else: the spec and its validation (each
// error names its field), the cron grammar Temporal Schedules accept and
// the fire times it names, one-shot clamping, the convergence condition,
// exponential backoff and the circuit, per-owner and global quotas, and the
// state an intent carries from fire to fire with the decision each fire
// takes when it starts (run, skip as an overlap, or over the catch-up
// bound). No I/O and no Temporal: the fire workflow, the starter and the
// tests apply the same rules. docs/schedules.md tells how they map onto
// Temporal Schedules.
package intent
