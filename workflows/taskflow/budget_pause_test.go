package taskflow

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/mapping"
)

// budgetPaused is a task on account team whose first phase spent $1.50
// of a $1 budget whose action is pause.
func budgetPaused(t *testing.T) (*testsuite.TestWorkflowEnvironment, *accountRig, taskapi.TaskInput) {
	env, c := newAccountRig(t)
	c.costUSD = 1.5
	return env, c, taskapi.TaskInput{Dispatch: exampleDispatch(t), Account: "team",
		Budget: &costs.Budget{LimitUSD: 1, Action: costs.Pause}}
}

// statusAt queries the task's status at the given time into the test.
func statusAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, after time.Duration, got *taskapi.Status) {
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(taskapi.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(got))
	}, after)
}

func (c *accountRig) notesLike(prefix string) []string {
	var out []string
	for _, n := range c.notes {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// An account's pause heard during a budget pause does not give the budget
// pause an end: the task still waits for its budget to be raised.
func TestBudgetPauseOutlastsAnAccountsPause(t *testing.T) {
	env, c, in := budgetPaused(t)
	start := env.Now()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(accountapi.SignalNotice, accountapi.Notice{Account: "team", Until: start.Add(3 * time.Hour), By: "T9", Phase: "implement"})
	}, time.Hour)
	var st taskapi.Status
	statusAt(t, env, 5*time.Hour, &st)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 5}) }, 10*time.Hour)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Len(t, c.resumedAt, 1)
	require.False(t, c.resumedAt[0].Before(start.Add(10*time.Hour)), "resumed at %v, %v after the start: only a raised budget ends the pause",
		c.resumedAt[0], c.resumedAt[0].Sub(start))
	require.Equal(t, taskapi.StagePaused, st.Stage)
	require.Equal(t, taskapi.PausedBudget, st.Pause.Reason)
	require.True(t, st.Pause.Until.IsZero(), "a budget pause has no end of its own: %v", st.Pause.Until)
}

// An account's resume ends the account's pause, not the task's budget
// pause.
func TestBudgetPauseOutlastsAnAccountsResume(t *testing.T) {
	env, c, in := budgetPaused(t)
	start := env.Now()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(accountapi.SignalNotice, accountapi.Notice{Account: "team", Resume: true, Reason: "limit raised"})
	}, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 5}) }, 10*time.Hour)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, c.resumedAt, 1)
	require.False(t, c.resumedAt[0].Before(start.Add(10*time.Hour)), "resumed at %v, %v after the start: only a raised budget ends the pause",
		c.resumedAt[0], c.resumedAt[0].Sub(start))
}

// A budget raised while the task's account is paused does not start the
// conductor into the account's limit: the task then waits for the
// account's moment, as a task held for its account does.
func TestBudgetRaisedWhileTheAccountIsPausedWaitsForTheAccount(t *testing.T) {
	env, c, in := budgetPaused(t)
	start := env.Now()
	until := start.Add(5 * time.Hour).UTC()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(accountapi.SignalNotice, accountapi.Notice{Account: "team", Until: until, By: "T9", Phase: "implement"})
	}, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 5}) }, 2*time.Hour)
	var st taskapi.Status
	statusAt(t, env, 3*time.Hour, &st)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Len(t, c.resumedAt, 1)
	require.False(t, c.resumedAt[0].Before(until), "resumed at %v, the account paused until %v", c.resumedAt[0], until)
	require.Equal(t, taskapi.PausedUsageLimit, st.Pause.Reason)
	require.Equal(t, "team", st.Pause.Account)
	require.Equal(t, "T9", st.Pause.By)
	require.Equal(t, until, st.Pause.Until.UTC())
	require.Len(t, c.notesLike("resumed"), 1, "no resume told before the conductor resumed: %q", c.notes)
}

// A person's resume ends a budget pause at once, the account's pause
// notwithstanding, as it ends any pause of one task.
func TestResumeEndsABudgetPauseWhileTheAccountIsPaused(t *testing.T) {
	env, c, in := budgetPaused(t)
	start := env.Now()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(accountapi.SignalNotice, accountapi.Notice{Account: "team", Until: start.Add(5 * time.Hour), By: "T9"})
	}, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalResume, taskapi.ResumeSignal{Reason: "go on"}) }, 2*time.Hour)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, c.resumedAt, 1)
	require.True(t, c.resumedAt[0].Before(start.Add(3*time.Hour)), "resumed at %v, %v after the start", c.resumedAt[0], c.resumedAt[0].Sub(start))
}

// A person's resume lets a budget-paused task go on past what it had spent
// then, not past its budget for good: once it spends more, it pauses
// again, until the budget is raised.
func TestSpendAfterAResumePausesAgain(t *testing.T) {
	env, c, in := budgetPaused(t)
	in.Account = ""
	start := env.Now()
	c.costAfterResume = 2
	c.runFor = 2 // two deliveries after a resume before the plan completes
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalResume, taskapi.ResumeSignal{Reason: "go on"}) }, time.Hour)
	var st taskapi.Status
	statusAt(t, env, 5*time.Hour, &st)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 5}) }, 10*time.Hour)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Len(t, c.resumedAt, 2, "resumed by the person, paused again on more spend, resumed by the raised budget")
	require.False(t, c.resumedAt[1].Before(start.Add(10*time.Hour)))
	require.Equal(t, taskapi.PausedBudget, st.Pause.Reason)
	require.Contains(t, st.Pause.Budget, "Budget exceeded ($2.00 spent of $1.00)")
	require.Len(t, c.notesLike("paused"), 2, "%q", c.notes)
	require.NotContains(t, c.statuses, mapping.TaskBlocked)
}

// A budget raised to less than was spent keeps the pause; one raised
// enough ends it, and spending past the raised budget pauses again.
func TestRaisedBudgetSpentPausesAgain(t *testing.T) {
	env, c, in := budgetPaused(t)
	in.Account = ""
	start := env.Now()
	c.costAfterResume = 2.5
	c.runFor = 2
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 1.2}) }, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 2}) }, 2*time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 5}) }, 10*time.Hour)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, c.resumedAt, 2)
	require.False(t, c.resumedAt[0].Before(start.Add(2*time.Hour)), "$1.20 is still spent")
	require.False(t, c.resumedAt[1].Before(start.Add(10*time.Hour)), "$2 spent again: paused until raised")
}

// A budget whose action was set to block while the task waited for it
// ends the task blocked once, resumed by a person, it spends more.
func TestBudgetSetToBlockWhilePausedBlocksAfterAResume(t *testing.T) {
	env, c, in := budgetPaused(t)
	in.Account = ""
	c.costAfterResume = 2
	c.runFor = 2
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 1, Action: costs.Block})
	}, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalResume, taskapi.ResumeSignal{Reason: "go on"}) }, 2*time.Hour)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, c.resumedAt, 1, "still spent: the new action did not end the pause, the person did")
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Equal(t, "Budget exceeded ($2.00 spent of $1.00)", res.Outcome.LastError)
}

// A blocking budget spent ends the task blocked, and a redispatch that
// comes while that attempt ends starts no conductor: it would run with the
// budget spent, and no later checkpoint would stop it. The attempt it
// would start ends blocked at once, saying what was spent.
func TestRedispatchWithTheBlockingBudgetSpentStartsNoConductor(t *testing.T) {
	env, c := newAccountRig(t)
	c.costUSD = 1.5
	in := taskapi.TaskInput{Dispatch: exampleDispatch(t), Budget: &costs.Budget{LimitUSD: 1, Action: costs.Block}}
	var once sync.Once
	c.onStatus = func(u taskact.TaskStatusUpdate) {
		if u.Status == mapping.TaskBlocked {
			once.Do(func() {
				env.SignalWorkflow(taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: "try again"})
			})
		}
	}
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, c.startedAt, 1, "no conductor for the redispatch")
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Equal(t, "Budget exceeded ($1.50 spent of $1.00)", res.Outcome.LastError)
	require.Len(t, res.Attempts, 2)
	require.Nil(t, res.Attempts[1].CostUSD, "the attempt that never started spent nothing")
	v, err := env.QueryWorkflow(taskapi.QueryCost)
	require.NoError(t, err)
	var cost taskapi.Cost
	require.NoError(t, v.Get(&cost))
	require.InDelta(t, 1.5, cost.Summary.TotalUSD, 1e-9, "the first attempt's spend, once")
}
