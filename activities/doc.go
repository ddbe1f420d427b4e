// Package activities holds what the activity wings share: the worker-side
// Config (nothing in it comes from workflow input), the work root's
// layout, the canonical event stream store, heartbeats, waiting for a
// workflow to close and atomic file writes. Each workflow wing's side
// effects are in the wing of the same name: taskact (the task's conductor,
// tail, brief and status), runact (a run's status.json, its stream, its git
// worktrees), slotact, accountact, intentact and intakeact. Activities are
// idempotent so that Temporal may retry them after any failure.
package activities
