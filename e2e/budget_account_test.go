//go:build realserver

package e2e

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// A task paused for its budget on an agent account. Another task on the
// account meets a usage limit (the account pauses, then its reset passes)
// and a person resumes the account: neither ends the budget pause. Only
// `starter budget set` does, and the same plan completes as attempt 1.
func TestTaskBudgetPauseOutlastsItsAccountsPauseAndResume(t *testing.T) {
	hook := newHookReceiver(t, "hook-secret")
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=1s cost=0.20",
		Env: []string{"KARVI_EDDA_NOTIFY_SECRET=hook-secret"}, WorkerArgs: []string{"-notify-url", hook.srv.URL}})
	account := r.PoolName("acct-budget")
	t.Cleanup(func() {
		_ = r.Client.TerminateWorkflow(context.Background(), accountapi.WorkflowID(account), "", "test cleanup")
	})
	tuning := &taskapi.Tuning{PauseMargin: 200 * time.Millisecond, CheckpointEvery: 100 * time.Millisecond}
	r.Workspace("BA1")
	r.Workspace("BA2")
	run := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "BA1", "Spend, then wait."), Account: account,
		Budget: &costs.Budget{LimitUSD: 0.3, Action: costs.Pause}, Tuning: tuning})
	budgetPaused := func() taskapi.Status {
		t.Helper()
		st, err := r.Status("BA1")
		require.NoError(t, err)
		require.NotNil(t, st.Pause, "the task must still wait for its budget")
		require.Equal(t, taskapi.PausedBudget, st.Pause.Reason)
		require.True(t, st.Pause.Until.IsZero(), "a budget pause has no end of its own: %v", st.Pause.Until)
		return st
	}
	require.Eventually(t, func() bool {
		st, err := r.Status("BA1")
		return err == nil && st.Pause != nil
	}, 60*time.Second, 100*time.Millisecond, "the budget must pause the task")
	budgetPaused()

	// Another task on the account meets its usage limit: the account
	// pauses for a few seconds, and that task completes after the reset.
	other := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "BA2", "Limited. [sim phase=implement limit resets=2s]"),
		Account: account, Tuning: tuning})
	res := r.Result(other)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	st := budgetPaused()
	require.Equal(t, 1, st.Pauses, "the account's pause made no pause of its own")
	require.Empty(t, r.LiveConductors(), "no conductor runs while the budget pauses the task")

	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	noticesBefore := accountNotices(t, r, "BA1")
	out, err := exec.Command(bin, "-address", r.Server.Addr, "-task-queue", r.Queue, "account", "resume", "-account", account, "-reason", "limit raised").CombinedOutput()
	require.NoError(t, err, "%s", out)
	// Wait for the account's resume notice to reach the task (its
	// history counts one more account signal), then look: a task it
	// resumed would be running.
	require.Eventually(t, func() bool { return accountNotices(t, r, "BA1") > noticesBefore }, 60*time.Second, 100*time.Millisecond,
		"the account's resume must reach the task")
	budgetPaused()
	require.Empty(t, r.LiveConductors(), "no conductor runs while the budget pauses the task")

	out, err = exec.Command(bin, "-address", r.Server.Addr, "-task-queue", r.Queue, "budget", "set", "-budget", "5", "BA1").CombinedOutput()
	require.NoError(t, err, "%s", out)
	res = r.Result(run)
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Equal(t, 1, res.Attempt)
	require.Equal(t, 1, phaseStarts(r, "BA1", res.PlanName)["implement"])
	keepTaskHistory(t, r, "BA1", "PAUSE_WRITE_HISTORY", "pause-budget-account.json")
	keepTaskHistory(t, r, "BA2", "PAUSE_WRITE_HISTORY", "pause-own-limit.json")
}

// accountNotices counts the account's notices the task's workflow has
// received so far.
func accountNotices(t *testing.T, r *testrig.Rig, taskID string) int {
	t.Helper()
	it := r.Client.GetWorkflowHistory(context.Background(), taskapi.WorkflowID(taskID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == accountapi.SignalNotice {
			n++
		}
	}
	return n
}
