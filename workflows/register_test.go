package workflows

import (
	"path/filepath"
	"testing"

	"karvi-edda-temporal/testkit/replaytest"
)

// Every history recorded from a real run (testdata/histories, in the SDK's
// JSON history format) must replay on the current workflow code: a change
// that would break workflows already running in production fails here with
// a non-determinism error. faults.TestReplayRecordedHappyPath records
// happy.json from a live dev server (FAULTS_WRITE_HISTORY=1 rewrites it);
// refresh it only together with a versioned (workflow.GetVersion) change.
//
// The files are kept for every shape the workflow had, so that each change
// is proven against the histories before it: v1-* were recorded before the
// attempt became a value of its own (a continued run among them carries the
// old flat state), happy.json and settle-abort.json before delivery moved
// into the tail, deliver-* after (abort, redispatch, retries exhausted, a
// run continued-as-new and its successor), fleet-host-lost.json once an
// attempt's activities went to its host's queue (a task whose host was lost
// mid-run, started anew on another; faults.TestHostLossMovesItsTasksElsewhere
// records it). run-* are RunWorkflow's: the
// sample run (loops, an upgrade, a failure cascade), and a run that
// continued-as-new with tasks running and one of its successors, which
// waits for carried tasks by activity; run-sample-v2 after the run began
// writing status.json before its first task, run-budget-block a run its
// budget stopped, run-budget-pause a run its budget paused until `run
// budget set` raised it (e2e.TestRunBudgetPauseWaitsForRunBudgetSet,
// PAUSE_WRITE_HISTORY=1), run-reopened an ended run reopened to skip a task.
// slots-* are agent slots: a task that waited in line for its slot, a task
// refused one by its timeout, and the pool that served them (recorded while
// it still ran). stall-* are tasks whose phase stalled, one per action
// (warn, redispatch, abort; e2e.TestStall* records them with
// STALL_WRITE_HISTORY=1).
// notify-* are a task that ended blocked and a run that
// ended, each telling the webhook (e2e.TestWebhookHearsBlockedAndRunEndedOnce
// records them, NOTIFY_WRITE_HISTORY=1).
// notrun-board-cancel is a task cancelled on the board before its
// attempt's first status write, which was not run
// (e2e.TestKarviCancelledBeforeTheAttemptStarted, NOTRUN_WRITE_HISTORY=1).
// pause-* are paused and resumed tasks: one that met a
// usage limit on an agent account and the one it paused with it
// (e2e.TestAccountLimitPausesEveryTaskOnTheAccount), and one its budget
// paused until it was raised (e2e.TestTaskBudgetPauseWaitsForBudgetSet);
// pause-budget-account is a task its budget paused while its account
// paused and was resumed, which only a raised budget resumed, and
// pause-own-limit the task on that account whose own limit paused it
// (e2e.TestTaskBudgetPauseOutlastsItsAccountsPauseAndResume, recorded once
// budget pauses kept their end, the pause cap counted own limits and
// delivery ids carried the chain's nonce); PAUSE_WRITE_HISTORY=1 rewrites
// them. account-v0 is an agent account's
// workflow (joins by signal, a resume) recorded by `make run-many` before
// the account kept its pause in its memo (`KEEP=1`, then `temporal
// workflow show --output json`).
func TestReplayRecordedHistories(t *testing.T) {
	replaytest.Histories(t, filepath.Join("testdata", "histories"), Register)
}
