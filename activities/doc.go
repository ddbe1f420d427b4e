// Package activities holds the side effects of a task run: writing plan.yaml,
// spawning and stopping the conductor, tailing its event log, and writing the
// brief and task status to a sink. Activities are idempotent so that Temporal
// may retry them after any failure.
package activities
