// Package runstatus keeps the status.json document of a run: the run's
// state, each task's state and, once the run is over, a summary. The
// document has KARIMO's shape, so its tools can read what a run here
// writes.
//
// Status is a reducer: New builds the document of a run that has not
// started, and each method applies one event a run workflow observes (the
// run started, a task started or ended, a task stalled, an operator
// skipped or retried a task, a task's worktree was made, merged, found in
// conflict or removed). It is pure: no I/O, no Temporal and no
// clock, every time comes in as an argument, and every method walks the
// tasks in the run file's order, never in map order, so a workflow may
// call it and replay to the same document.
package runstatus
