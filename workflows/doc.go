// Package workflows holds the durable orchestration: one TaskWorkflow per
// karvi task. Code here must stay deterministic; every side effect goes
// through an activity.
package workflows
