// Code in this package that changes what a workflow records is versioned
// with workflow.GetVersion, and every change id it asks for is listed here,
// once, with what it guards and since when: histories recorded before a
// change replay on the path they took, so an id is never renamed, reused
// or dropped while a workflow that recorded it may still be open. A new
// change adds a constant here (workflows.TestGetVersionUsesListedChangeIDs
// fails on a GetVersion call whose id is not listed). CONTRIBUTING.md says
// how to add one.

package runflow

// The change ids of RunWorkflow, oldest first.
const (
	// versionInitialStatus names the change that writes status.json (and the
	// run's first events) before the first task starts.
	// Live since 2026-11-22; asked in run.go.
	versionInitialStatus = "run-initial-status"

	// versionAttemptReached names the change that made a run number a task's
	// next attempt on from the one its last workflow ended on, not from the
	// one that workflow began with.
	// Live since 2026-11-25; asked in run.go.
	versionAttemptReached = "run-attempt-reached"

	// versionBudgetPause names the change that lets a run's budget pause the
	// run; runs recorded before it could not have a pause budget. Version 2
	// tells the webhook that the run waits for a person.
	// Live since 2026-11-25; asked in budget.go.
	versionBudgetPause = "run-budget-pause"

	// versionGitStepFailsTask names the change that made a git step that
	// exhausted its retries fail the task it was for (or, for the feature
	// branch, the tasks that would start) instead of the whole run, whose
	// children were then abandoned and whose status.json said active for ever.
	// Live since 2026-11-25; asked in worktree.go.
	versionGitStepFailsTask = "run-git-step-fails-task"

	// versionHoldStartsForHandover names the change that makes a run due to
	// continue-as-new start no task until it has.
	// Live since 2026-11-28; asked in run.go.
	versionHoldStartsForHandover = "run-hold-starts-for-handover"

	// versionSignalsBuffered names the change that leaves the tasks' signals
	// buffered until a listener or the hand-over takes them, and counts as
	// written only the changes a status write carried.
	// Live since 2026-12-02; asked in signals.go.
	versionSignalsBuffered = "run-signals-buffered"
)
