// Package jobview is a task seen as a job of a spec-driven coding agent: a
// Job made of Attempts, each ending in a Verdict, with the job's RunState
// and Metrics, in the snake_case JSON such a tool prints with --json
// (docs/jobview.md gives the whole mapping and its reasons).
//
// The view is a reducer. A Tally folds one attempt's conductor events
// (mapping.Event, plus the token usage a line may carry) and snapshots of
// its state.json into a small record that round-trips through JSON, so the
// worker can fold a stream incrementally, checkpoint after checkpoint, or
// from a stored events.jsonl in one go, with the same result. BuildJob then
// joins the tallies with what only the workflow knows (where each attempt
// began and how it ended) into the Job.
//
// Nothing here does I/O, reads the clock or ranges over a map: the task
// workflow answers its job query with these functions.
package jobview
