package runflow

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/runstatus"
)

// queryAt reads the run's status.json document at a point of workflow time.
func queryAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, at time.Duration, into *runapi.View) {
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(runapi.QueryView)
		require.NoError(t, err)
		require.NoError(t, v.Get(into))
	}, at)
}

const pausedNote = "Budget exceeded ($0.40 spent of $0.40) (budget action pause: the run starts no new task and waits for a person: " +
	"`starter run budget set diamond -budget N` raises its budget, `starter run resume diamond` goes on past it)"

// A run budget with the action pause: a and e report $0.20 each half way,
// the budget is spent, the run pauses (paused_reason budget); a and e go
// on to their end, nothing else starts until `budget` raises the limit,
// and then the run finishes.
func TestRunBudgetPausesUntilRaised(t *testing.T) {
	f := &fakeTasks{}
	env, _ := runEnv(t, f)
	budget := costs.Budget{LimitUSD: 0.4, Action: costs.Pause}
	var answers []string
	var paused runapi.View
	queryAt(t, env, 5*time.Minute, &paused)
	update(env, 6*time.Minute, runapi.UpdateBudget, &answers, runapi.BudgetRequest{LimitUSD: -1})
	update(env, 7*time.Minute, runapi.UpdateBudget, &answers, runapi.BudgetRequest{LimitUSD: 0.45})
	update(env, 8*time.Minute, runapi.UpdateBudget, &answers, runapi.BudgetRequest{LimitUSD: 5})
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun), Budget: &budget})
	doc := runResult(t, env)

	require.Equal(t, runstatus.RunPaused, paused.Status.Status)
	require.Equal(t, runstatus.PausedBudget, paused.Status.PausedReason)
	require.False(t, paused.Status.PausedAt.IsZero())
	require.Equal(t, runstatus.TaskDone, paused.Status.Tasks["a"].Status, "a running task goes on to its end")
	require.Equal(t, runstatus.TaskQueued, paused.Status.Tasks["b"].Status, "nothing starts while the budget pauses the run")
	require.Equal(t, pausedNote, paused.BudgetNote)
	require.ElementsMatch(t, []string{"a: " + pausedNote, "e: " + pausedNote}, f.notes)
	require.Empty(t, f.aborted)
	require.Equal(t, []string{
		"budget: rejected: run diamond: budget: limitUsd: -1 must be a positive amount",
		"budget: <nil>", // $0.50 spent of $0.45: still paused
		"budget: <nil>",
	}, answers)
	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Empty(t, doc.PausedReason)
	require.Len(t, f.calls, 5)
	for i, c := range f.calls[:2] {
		require.Contains(t, []string{"a", "e"}, c.Dispatch.TaskID, "call %d", i)
	}
}

// A resume without a raise acknowledges what was spent: the run starts
// tasks again and pauses again once they spend more; a run without a
// budget refuses a budget change.
func TestRunBudgetPauseResumeAcknowledgesTheSpend(t *testing.T) {
	f := &fakeTasks{}
	env, _ := runEnv(t, f)
	budget := costs.Budget{LimitUSD: 0.4, Action: costs.Pause}
	var answers []string
	var resumed, again runapi.View
	update(env, 5*time.Minute, runapi.UpdateResume, &answers)
	queryAt(t, env, 5*time.Minute+10*time.Second, &resumed)
	queryAt(t, env, 9*time.Minute, &again)
	update(env, 10*time.Minute, runapi.UpdateBudget, &answers, runapi.BudgetRequest{LimitUSD: 5})
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun), Budget: &budget})
	doc := runResult(t, env)

	require.Equal(t, []string{"resume: <nil>", "budget: <nil>"}, answers)
	require.Equal(t, runstatus.RunActive, resumed.Status.Status, "the resume is not undone by the spend it acknowledged")
	require.Equal(t, runstatus.TaskRunning, resumed.Status.Tasks["b"].Status)
	require.Equal(t, runstatus.TaskRunning, resumed.Status.Tasks["c"].Status)
	// b and c report $0.20 each half way: more than was acknowledged.
	require.Equal(t, runstatus.RunPaused, again.Status.Status)
	require.Equal(t, runstatus.PausedBudget, again.Status.PausedReason)
	require.Equal(t, runstatus.TaskQueued, again.Status.Tasks["d"].Status)
	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Len(t, f.calls, 5)
}

func TestRunBudgetSetNeedsABudget(t *testing.T) {
	f := &fakeTasks{}
	env, _ := runEnv(t, f)
	var answers []string
	update(env, 10*time.Second, runapi.UpdateBudget, &answers, runapi.BudgetRequest{LimitUSD: 5})
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun)})
	require.Equal(t, runstatus.RunComplete, runResult(t, env).Status)
	require.Equal(t, []string{"budget: rejected: run diamond has no budget: start it with one (-budget) to set it"}, answers)
}

// A run budget's pause is accepted at the start (it used to be refused).
func TestRunBudgetActions(t *testing.T) {
	for _, a := range []costs.Action{costs.Warn, costs.Block, costs.Pause} {
		require.NoError(t, budgetError(&costs.Budget{LimitUSD: 1, Action: a}), a)
	}
	require.ErrorContains(t, budgetError(&costs.Budget{LimitUSD: 1, Action: "stop"}), `action: "stop"`)
}

// The Web UI's details say a run paused for its budget waits for a person.
func TestRunBudgetPauseShowsInDetails(t *testing.T) {
	r := &runFlow{st: runState{BudgetNote: pausedNote}}
	r.st.Doc.PausedReason = runstatus.PausedBudget
	require.Contains(t, budgetPauseDetails(r), "Paused for its budget, waiting for a person: "+pausedNote)
}

// A run its budget paused with nothing left to start ends when its running
// tasks do: there is nothing for a person to let go on.
func TestRunBudgetPauseEndsARunWithNothingLeft(t *testing.T) {
	f := &fakeTasks{}
	env, _ := runEnv(t, f)
	budget := costs.Budget{LimitUSD: 0.4, Action: costs.Pause}
	run := `{"title":"Two","slug":"two","concurrency":2,"tasks":[{"id":"a","title":"A"},{"id":"e","title":"E"}]}`
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(run), Budget: &budget})
	doc := runResult(t, env)
	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Empty(t, doc.PausedReason)
	require.True(t, doc.PausedAt.IsZero())
	require.Len(t, f.notes, 2, "the budget paused the run while a and e ran")
}

// What a resume acknowledged is not passed by a sum's rounding: the same
// spending added up in another order.
func TestSpentPastTheAcknowledged(t *testing.T) {
	require.False(t, spentPast(0.1+0.2, 0.3))
	require.False(t, spentPast(0.3, 0.1+0.2))
	require.True(t, spentPast(0.31, 0.3))
}
