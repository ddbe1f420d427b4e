// Package accountact holds the agent account wing's side effect: a task's
// update to its account's workflow (join, limit, resume), starting the
// workflow when it does not run yet.
package accountact
