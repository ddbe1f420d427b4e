// Package slotact holds the slot pool wing's side effects: a task's acquire
// update to its pool's workflow (a workflow cannot send an update itself),
// batched with the other acquires the worker makes for that pool at the
// same time, and the pool's look at its holders' workflows.
package slotact
