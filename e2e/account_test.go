//go:build realserver

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/workflows"
)

// phaseStarts counts the phase_start events of a plan's log, by phase.
func phaseStarts(r *testrig.Rig, task, plan string) map[string]int {
	starts := map[string]int{}
	for _, ev := range r.Events(task, plan) {
		if ev["type"] == "phase_start" {
			id, _ := ev["phase_id"].(string)
			starts[id]++
		}
	}
	return starts
}

func accountView(t *testing.T, r *testrig.Rig, account string) accountapi.View {
	t.Helper()
	return testrig.Query[accountapi.View](r, accountapi.WorkflowID(account), accountapi.QueryAccount)
}

// keepTaskHistory replays task taskID's history on the current code and,
// with env set to 1, keeps it with the recorded histories as name.
func keepTaskHistory(t *testing.T, r *testrig.Rig, taskID, env, name string) {
	t.Helper()
	keepHistory(t, r, taskapi.WorkflowID(taskID), env,
		filepath.Join("..", "workflows", "testdata", "histories", name), workflows.Register)
}

// Three tasks on one agent account; one meets the usage limit. All three
// pause (the other two are interrupted in their test phase), the account's
// pause outlives a SIGKILLed worker, a task started meanwhile waits for
// the reset before it starts, and all resume at the reset: each completes
// as attempt 1, its implement phase run once.
func TestAccountLimitPausesEveryTaskOnTheAccount(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	account := r.PoolName("acct")
	t.Cleanup(func() {
		_ = r.Client.TerminateWorkflow(context.Background(), accountapi.WorkflowID(account), "", "test cleanup")
	})
	tuning := &taskapi.Tuning{PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}
	ids := []string{"AC1", "AC2", "AC3"}
	msgs := map[string]string{
		"AC1": "Limited. [sim phase=implement delay=2s] [sim phase=test limit resets=15s]",
		"AC2": "Slow tests. [sim phase=test delay=8s]",
		"AC3": "Slow tests. [sim phase=test delay=8s]",
	}
	runs := map[string]client.WorkflowRun{}
	for _, id := range ids {
		r.Workspace(id)
		runs[id] = r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, id, msgs[id]), Account: account, Tuning: tuning})
	}
	paused := map[string]taskapi.Status{}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			st, err := r.Status(id)
			if err == nil && st.Pause != nil {
				paused[id] = st
			}
		}
		return len(paused) == 3
	}, 30*time.Second, 50*time.Millisecond, "every task on the account must pause")
	until := paused["AC1"].Pause.Until
	require.Empty(t, paused["AC1"].Pause.Account, "AC1 met the limit itself")
	for _, id := range []string{"AC2", "AC3"} {
		require.Equal(t, account, paused[id].Pause.Account)
		require.Equal(t, "AC1", paused[id].Pause.By)
		require.Equal(t, "test", paused[id].Pause.Phase, "interrupted in its test phase")
		require.True(t, paused[id].Pause.Until.Equal(until), "%s pauses until %v, the account until %v", id, paused[id].Pause.Until, until)
	}
	require.Empty(t, r.LiveConductors(), "no conductor runs on a paused account")
	view := accountView(t, r, account)
	require.True(t, view.Paused)
	require.Equal(t, "AC1", view.By)

	// The worker dies; the account's pause does not.
	require.NoError(t, r.KillWorker())
	r.StartWorker()
	r.Workspace("AC4")
	late := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "AC4", "Late. [sim checks=pass]"), Account: account, Tuning: tuning})
	require.Eventually(t, func() bool {
		st, err := r.Status("AC4")
		return err == nil && st.Pause != nil
	}, 20*time.Second, 50*time.Millisecond, "a task started on a paused account waits")
	st, err := r.Status("AC4")
	require.NoError(t, err)
	require.Equal(t, account, st.Pause.Account)
	require.Zero(t, st.ConductorPID, "nothing started")

	for _, id := range ids {
		res := r.Result(runs[id])
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, "%s: %s", id, res.Outcome.LastError)
		require.Equal(t, 1, res.Attempt, "%s: a pause is not an attempt", id)
		require.Equal(t, 1, phaseStarts(r, id, res.PlanName)["implement"], "%s: the passed phase is not run again", id)
		st, err := r.Status(id)
		require.NoError(t, err)
		require.Equal(t, 1, st.Pauses, id)
	}
	keepTaskHistory(t, r, "AC1", "PAUSE_WRITE_HISTORY", "pause-account-limited.json")
	keepTaskHistory(t, r, "AC2", "PAUSE_WRITE_HISTORY", "pause-account-member.json")
	res := r.Result(late)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	first := r.Events("AC4", res.PlanName)[0]
	ts, err := time.Parse(time.RFC3339Nano, first["ts"].(string))
	require.NoError(t, err)
	require.False(t, ts.Before(until.Add(-time.Second)), "AC4 started at %v, the account paused until %v", ts, until)
}

// A paused task gives its agent slot back: in a pool of one, B runs while
// A waits for its reset, and A takes the slot again to resume.
func TestPausedTaskGivesItsSlotToTheNextInLine(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	pool := r.PoolName("pause")
	r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 1})
	tuning := &taskapi.Tuning{PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}
	r.Workspace("SPA")
	r.Workspace("SPB")
	a := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "SPA", "Limited. [sim phase=test limit resets=5s]"),
		Slots: &taskapi.SlotRequest{Pool: pool}, Account: "acct-spa", Tuning: tuning})
	r.WaitPool(pool, "A holds the slot", func(v slotapi.View) bool { return len(v.Holders) == 1 })
	b := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "SPB", "Other account. [sim checks=pass]"),
		Slots: &taskapi.SlotRequest{Pool: pool}, Account: "acct-spb", Tuning: tuning})
	r.WaitPool(pool, "B holds the slot while A is paused", func(v slotapi.View) bool {
		return len(v.Holders) == 1 && v.Holders[0].Task == "SPB"
	})
	st, err := r.Status("SPA")
	require.NoError(t, err)
	require.NotNil(t, st.Pause, "A is paused while B holds the slot")

	resB := r.Result(b)
	require.EqualValues(t, "completed", resB.Outcome.TaskStatus, resB.Outcome.LastError)
	resA := r.Result(a)
	require.EqualValues(t, "completed", resA.Outcome.TaskStatus, resA.Outcome.LastError)
	require.Equal(t, 1, resA.Attempt)
	require.Equal(t, 1, phaseStarts(r, "SPA", resA.PlanName)["implement"])
	v := r.Pool(pool)
	require.Empty(t, v.Holders)
}

// `starter resume` of one task ends that task's pause only: it completes
// while its account stays paused. `starter account resume` ends the
// account's pause and every member's: the task that met the limit resumes
// at once (and, its limit still there, meets it again).
func TestAccountResumeEndsEveryPause(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	account := r.PoolName("acct-resume")
	t.Cleanup(func() {
		_ = r.Client.TerminateWorkflow(context.Background(), accountapi.WorkflowID(account), "", "test cleanup")
	})
	tuning := &taskapi.Tuning{PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}
	r.Workspace("AR1")
	r.Workspace("AR2")
	r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "AR1", "Limited. [sim phase=implement delay=2s] [sim phase=test limit resets=10m]"),
		Account: account, Tuning: tuning})
	b := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "AR2", "Slow tests. [sim phase=test delay=6s]"), Account: account, Tuning: tuning})
	require.Eventually(t, func() bool {
		st, err := r.Status("AR2")
		return err == nil && st.Pause != nil
	}, 30*time.Second, 50*time.Millisecond, "the other task on the account must pause")

	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	out, err := exec.Command(bin, "-address", r.Server.Addr, "-task-queue", r.Queue, "resume", "AR2").CombinedOutput()
	require.NoError(t, err, "%s", out)
	res := r.Result(b)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Equal(t, 1, res.Attempt)
	require.Equal(t, 1, phaseStarts(r, "AR2", res.PlanName)["implement"])
	require.True(t, accountView(t, r, account).Paused, "one task's resume leaves the account paused")

	out, err = exec.Command(bin, "-address", r.Server.Addr, "-task-queue", r.Queue, "account", "resume", "-account", account, "-reason", "limit raised").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "account "+account+": not paused")
	require.Eventually(t, func() bool {
		st, err := r.Status("AR1")
		return err == nil && st.Pauses >= 2
	}, 30*time.Second, 100*time.Millisecond, "the account's resume resumed the task that met the limit")
}

// Three tasks that name no account and no slot pool, on one worker: they
// run on the worker's account (by default one per task queue), so when
// one meets the usage limit all three pause, and all resume at the reset,
// each as attempt 1 with its passed phase not run again.
func TestDefaultAccountPausesTasksThatNameNone(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	account := accountapi.QueueAccount(r.Queue)
	tuning := &taskapi.Tuning{PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}
	ids := []string{"DA1", "DA2", "DA3"}
	msgs := map[string]string{
		"DA1": "Limited. [sim phase=implement delay=2s] [sim phase=test limit resets=12s]",
		"DA2": "Slow tests. [sim phase=test delay=8s]",
		"DA3": "Slow tests. [sim phase=test delay=8s]",
	}
	runs := map[string]client.WorkflowRun{}
	for _, id := range ids {
		r.Workspace(id)
		runs[id] = r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, id, msgs[id]), Tuning: tuning})
	}
	paused := map[string]taskapi.Status{}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			st, err := r.Status(id)
			if err == nil && st.Pause != nil {
				paused[id] = st
			}
		}
		return len(paused) == 3
	}, 30*time.Second, 50*time.Millisecond, "every task on the worker's account must pause")
	until := paused["DA1"].Pause.Until
	for _, id := range []string{"DA2", "DA3"} {
		require.Equal(t, account, paused[id].Pause.Account, id)
		require.Equal(t, "DA1", paused[id].Pause.By, id)
		require.True(t, paused[id].Pause.Until.Equal(until), "%s pauses until %v, the account until %v", id, paused[id].Pause.Until, until)
	}
	require.Empty(t, r.LiveConductors(), "no conductor runs on a paused account")
	view := accountView(t, r, account)
	require.True(t, view.Paused)
	require.Len(t, view.Members, 3)

	for _, id := range ids {
		res := r.Result(runs[id])
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, "%s: %s", id, res.Outcome.LastError)
		require.Equal(t, 1, res.Attempt, "%s: a pause is not an attempt", id)
		require.Equal(t, 1, phaseStarts(r, id, res.PlanName)["implement"], "%s: the passed phase is not run again", id)
	}
	for _, id := range []string{"DA2", "DA3"} {
		var resumed time.Time
		for _, ev := range r.Events(id, r.Result(runs[id]).PlanName) {
			ts, err := time.Parse(time.RFC3339Nano, ev["ts"].(string))
			require.NoError(t, err)
			if ev["type"] == "phase_start" && ev["phase_id"] == "test" {
				resumed = ts
			}
		}
		require.False(t, resumed.Before(until.Add(-time.Second)), "%s ran its test phase again at %v, before the reset %v", id, resumed, until)
	}
	require.Eventually(t, func() bool { return len(accountView(t, r, account).Members) == 0 },
		10*time.Second, 100*time.Millisecond, "every task left the account when it ended")
	keepTaskHistory(t, r, "DA2", "DEFAULT_ACCOUNT_WRITE_HISTORY", "pause-default-account-member.json")
}
