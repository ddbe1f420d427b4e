// Code in this package that changes what a workflow records is versioned
// with workflow.GetVersion, and every change id it asks for is listed here,
// once, with what it guards and since when: histories recorded before a
// change replay on the path they took, so an id is never renamed, reused
// or dropped while a workflow that recorded it may still be open. A new
// change adds a constant here (workflows.TestGetVersionUsesListedChangeIDs
// fails on a GetVersion call whose id is not listed). CONTRIBUTING.md says
// how to add one.

package taskflow

// The change ids of TaskWorkflow, oldest first.
const (
	// versionAgentSlots names the change that added slot waits. It is only
	// asked for by tasks that name a pool, so every other task's history is
	// what it was.
	// Live since 2026-11-22; asked in slots.go.
	versionAgentSlots = "agent-slots"

	// versionDeliverInTail names the change that moved brief delivery into
	// the tail activity.
	// Live since 2026-11-22; asked in task.go.
	versionDeliverInTail = "deliver-in-tail"

	// versionSettle versions the settling patch at the end of an attempt.
	// Live since 2026-11-22; asked in task.go.
	versionSettle = "settle-brief"

	// versionStreamFlush names the local activity that stores the steps left
	// at the workflow's end.
	// Live since 2026-11-22; asked in stream.go.
	versionStreamFlush = "stream-flush"

	// versionAccountPause names the change that made a task share its
	// account's pauses and give its slot back while paused. Only tasks with an
	// account (or a slot pool) ask for it.
	// Live since 2026-11-25; asked in pause_account.go.
	versionAccountPause = "account-pause"

	// versionAttemptIdentity names the change that gave attempts a nonce.
	// Workflows recorded before it keep naming their attempts by number only.
	// Live since 2026-11-25; asked in identity.go.
	versionAttemptIdentity = "attempt-identity"

	// versionNotesInline names the change that reads notes where they are
	// used instead of in a coroutine of their own: the root coroutine runs
	// first in a workflow task, so a note that came with the checkpoint before
	// continue-as-new reached that coroutine only after the state was handed
	// over, and was lost.
	// Live since 2026-11-25; asked in budget.go.
	versionNotesInline = "notes-inline"

	// versionPauseStatus names the change that tells karvi of a pause and a
	// resume through the task's result.
	// Live since 2026-11-25; asked in pause.go.
	versionPauseStatus = "pause-status"

	// versionEarlyEnd names the change that signals the run when an attempt
	// completed, before the final status write.
	// Live since 2026-11-25; asked in early_end.go.
	versionEarlyEnd = "run-early-end"

	// versionSettleCatchesUp versions the read of the sink's brief before an attempt
	// whose host was lost is settled.
	// Live since 2026-11-25; asked in deliver.go.
	versionSettleCatchesUp = "settle-catches-up"

	// versionSlotAskAgain names the change that made a waiter ask its pool
	// again from time to time.
	// Live since 2026-11-25; asked in slots.go.
	versionSlotAskAgain = "slot-ask-again"

	// versionStallWatch versions what the workflow does on a stall the tail reports.
	// Live since 2026-11-25; asked in stall.go.
	versionStallWatch = "stall-watch"

	// versionJoinedUnread names the change that makes a task whose join went
	// to its account, but whose read of the account's pause failed, a member
	// that leaves at the end; before it, the task took itself as no member,
	// sent no leave, and the account kept signalling whatever workflow later
	// held the task's id.
	// Live since 2026-12-02; asked in pause_account.go.
	versionJoinedUnread = "account-joined-unread"

	// versionBudgetPauseEnds names the change from which a budget pause ends
	// only as above. Before it, an account's notice ended a budget pause (or
	// gave it the account's reset) and, after any resume, the spent budget
	// was never checked again.
	// Live since 2026-12-02; asked in budget.go.
	versionBudgetPauseEnds = "budget-pause-ends"

	// versionChainDeliveryIDs names the change that put the chain's nonce in
	// a task's delivery ids. Every new workflow of a task (a run's next loop,
	// a redispatch after the last one ended, an intake send-back, a schedule's
	// fire) has the same workflow id and counts its pauses, stalls and
	// attempts from the start again, so without the nonce its ids were those
	// of the workflow before, and a receiver that skips ids it has seen
	// dropped its events.
	// Live since 2026-12-02; asked in notify.go.
	versionChainDeliveryIDs = "chain-delivery-ids"

	// versionCurrentErrors versions exitOutcome's rule that only a failed or
	// stale phase's error in state.json explains the conductor's exit.
	// Live since 2026-12-02; asked in deliver.go.
	versionCurrentErrors = "exit-current-errors"

	// versionNotRun names the change that ends an attempt the board cancelled
	// (or deleted) before its first status write as not run. Before it, such a
	// start failed the workflow; a result that says so from a newer worker
	// then read as a conductor that could not start.
	// Live since 2026-12-02; asked in deliver.go.
	versionNotRun = "not-run-on-board-cancel"

	// versionOwnLimitCap names the change from which the pause cap counts
	// the task's own usage limits only. Before it, every pause counted (its
	// account's, a hold before the start, its budget's), so a task on a busy
	// account could end blocked at its first limit of its own.
	// Live since 2026-12-02; asked in pause.go.
	versionOwnLimitCap = "own-limit-cap"

	// versionBudgetSpentNoAttempt names the change from which an attempt
	// does not start while the task's blocking budget is spent: a
	// redispatch that came while a budget-blocked attempt ended started a
	// conductor that no checkpoint stopped (the budget had acted already).
	// Asked only when the budget is spent at an attempt's start.
	// Live since 2026-12-02; asked in task.go.
	versionBudgetSpentNoAttempt = "budget-spent-no-attempt"
)

// The versions of the deliver-in-tail change: one marker at the start of
// a task carries the changes of that moment, each raising its version.
const (
	// versionHostRouting is the version of the deliver-in-tail change (task.go)
	// from which an attempt's conductor activities go to its host's queue.
	// Live since 2026-11-22; asked in task.go.
	versionHostRouting = 2

	// versionUsageLimits is the version of the deliver-in-tail change (task.go)
	// from which deliveries follow the transcripts and a usage limit pauses.
	// Live since 2026-11-25; asked in task.go.
	versionUsageLimits = 3

	// versionClaimHost is the version of the deliver-in-tail change (task.go)
	// from which an attempt first claims a host on the shared queue, then
	// starts on that host's own queue. Before it, the start itself went to
	// the shared queue, and a try that timed out after starting the
	// conductor (a loaded host whose heartbeats came late) was retried on
	// another host, which started a second conductor for the same attempt.
	// Live since 2026-11-25; asked in task.go.
	versionClaimHost = 4
)
