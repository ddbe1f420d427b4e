// Package taskact holds the task wing's side effects: claiming a host,
// writing plan.yaml, spawning, interrupting and stopping the conductor,
// delivering its events to the brief from the tail, storing the canonical
// stream, reading agent transcripts for usage limits and stalls, writing the
// task's status to the sink, and the webhook's notifications.
package taskact
