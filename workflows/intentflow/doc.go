// Package intentflow is the schedule intent wing's workflow:
// IntentFireWorkflow is one fire of a Temporal Schedule that carries an
// intent: it decides from the intent's state whether to start its target
// (a task or a run), waits for it, and records the outcome for the next
// fire. The rules are package intent's; clients use intentapi; the
// activities are activities/intentact.
package intentflow
