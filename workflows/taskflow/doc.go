// Package taskflow is the task wing's workflow: TaskWorkflow runs one karvi
// task through the conductor (claim a host, start an attempt, deliver its
// events to the brief at file speed, settle the brief, write the status),
// honours abort and redispatch, waits for an agent slot, pauses on usage
// limits, budgets and stalls, and continues as new when its history grows.
// EventsWorkflow serves reads of a task's canonical event stream. Clients
// use taskapi; the activities are activities/taskact.
package taskflow
