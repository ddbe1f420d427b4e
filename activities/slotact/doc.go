// Package slotact holds the slot pool wing's side effects: a task's acquire
// and release updates to its pool's workflow (a workflow cannot send an
// update itself) and the pool's look at its holders' workflows.
package slotact
