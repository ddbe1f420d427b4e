// Package soak holds the pure parts of the soak: the journal a driver keeps
// of what it did (Record), the snapshot of what the system did and left
// behind (Observed), and the invariants judged over both. Nothing here does
// I/O or talks to Temporal, so every rule is table-tested and fuzzed on its
// own; the collectors that fill an Observed (work roots, the brief sink,
// the karvi fake, /proc, the workflows' queries) live in soak/observe, and
// the driver in cmd/soak.
//
// Each invariant is a Check: a function from an Observed to the violations
// it finds. A Violation names its invariant and task and carries evidence a
// person can follow (attempt, plan, run directory, host, times, values).
// CheckLive runs the continuous checks, which judge the sampled timeline
// and may run at any time; CheckFinal the end-state checks; CheckAll both,
// sorted for a stable report.
//
// How the checks decide, and what excuses a case:
//
//   - The timeline is Observed.Samples: the live conductors of each sample
//     (run directories whose process group has a running member) and, for
//     some tasks, their status query. A task's status judges a sample only
//     while fresh (Config.Stale), a closed chain's for good. A conductor is
//     wanted while its task's chain is open, the run belongs to the current
//     attempt (its directory is the plan, or the plan's "-resume-N"), on
//     the attempt's host when both are known, and the attempt is neither
//     paused nor done.
//   - conductor-kept-while-wanted: a fence stop (a worker's log line) of a
//     wanted conductor, unless the sample after it shows another attempt or
//     the workflow's record ends that attempt before the stop; and a task
//     that ended blocked with an error saying its conductor was stopped or
//     died (Config.StopErrors) with no crash or stall injected into it and
//     no abort, cancel, redispatch or send-back of it (or of its run) in
//     the journal.
//   - one-conductor-per-attempt: two live run directories of one attempt in
//     one sample; reported once per set of directories.
//   - no-process-outlives-attempt: a conductor still live Config.Grace after
//     the first fresh sample that did not want it (a closed workflow's
//     sample speaks only for conductors seen before it: one first seen
//     after is a later workflow's until a newer sample says otherwise).
//   - usage-limit-pause-until-reset: a pause (known by its reason and its
//     start) scheduled to end before its reset, or seen over before its
//     reset, with no resume of the task, or of its account, journalled
//     while it lasted. A pause that ends with the task (closed, done,
//     finishing) or at a new attempt is not judged.
//   - budget-pause-until-raised: a budget pause given an end of its own, or
//     seen over (running again, or paused for another reason) with no
//     budget raise or resume of the task journalled while it lasted.
//   - spend-within-blocking-budget: at the end, spend over a block budget by
//     more than the task's costliest phase, unless the conductor was gone
//     within Config.Grace of the first sample at the limit (at a compressed
//     scale phases end within the real seconds a stop takes); along the
//     way, a phase other than the one in flight seen running more than
//     Config.Grace after a sample showed the spend at the limit.
//   - costs-agree, for a task that ended: the job view's steps against the
//     state.json totals of the attempts it lists (an attempt given up with
//     its host bounds them from above only: its conductor spends on, out
//     of reach, until its host's fence stops it); with one attempt, each
//     step against the brief's cost of that phase; the brief's total
//     against its attempt's state.json.
//   - ends-once-and-agrees: a task with no workflow (unless a run never
//     started it, or it was cancelled on the board first), an open one, a
//     workflow closed without an outcome or not completed, more closes
//     than the journal's starts and reopenings, two final statuses in
//     karvi's history with nothing reopening between, and karvi, the
//     brief (its plan, phases left running, phases not done for a
//     completed task), the run's status.json and the workflow disagreeing.
//   - brief-log-matches-events: the brief's conductor entries against its
//     attempt's events.jsonl lines, in order, by type, time and phase
//     (plan_aborted makes none; the log keeps the newest 500).
//   - webhook-ids-unique: one delivery id on two different events (bodies
//     that differ in more than when, from which host, and until when).
//   - nothing-left-running: every process the collector found after the
//     driver stopped all it started.
package soak
