package taskflow

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities/accountact"
	"karvi-edda-temporal/activities/slotact"
	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/slots"
)

// accountRig is a conductor that runs until it is interrupted (or, once
// resumed, completes), an agent account that answers as scripted, and a
// slot pool that grants at once.
type accountRig struct {
	mu  sync.Mutex
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	// join is the account's answer to a join; joinErr, when set, the
	// join activity's error instead.
	join        accountapi.View
	joinErr     error
	accountReqs []accountact.AccountRequest
	leaves      []string
	startedAt   []time.Time
	interrupted []time.Time
	resumedAt   []time.Time
	acquires    []slots.Key
	releases    []slots.Key
	notes       []string
	statuses    []mapping.TaskStatus
	updates     []taskact.TaskStatusUpdate
	// ownLimit: the first attempt's first delivery meets a usage limit.
	ownLimit *taskact.UsageLimit
	// completeAtOnce: the first delivery completes the plan.
	completeAtOnce bool
	// costUSD: what every delivery reports spent in the first phase.
	costUSD float64
	// claim is the answer to a claim that asks to join the worker's
	// account; claims are the claims asked.
	claim  taskact.ClaimHostResult
	claims []taskact.ClaimHostRequest
	// claimNotice: the account's notice reaches the task together with
	// the answer to a claim that joins it.
	claimNotice *accountapi.Notice
	// statusLeaves: the accounts the status writes left.
	statusLeaves []string
	// onStatus, when set, hears every status write as it is made.
	onStatus func(taskact.TaskStatusUpdate)
	// deliverEvery is how long a delivery takes (1 s when unset).
	deliverEvery time.Duration
	// stopped: the conductor was interrupted and not resumed since.
	stopped bool
	// completeAfterResumes: the plan completes only after that many
	// resumes (1 when unset), and runFor deliveries after the last one.
	completeAfterResumes, runFor, sinceResume int
	// costAfterResume: what deliveries report spent once resumed.
	costAfterResume float64
	// limitAt: the first delivery from then on meets a usage limit of the
	// task's own, with its reset limitReset later.
	limitAt    time.Time
	limitReset time.Duration
	limitMet   bool
}

func (c *accountRig) register() {
	env, t := c.env, c.t
	f := &fakeConductor{t: t}
	env.RegisterActivity(acts)
	env.RegisterActivity(slotActs)
	env.RegisterActivity(accountActs)
	env.OnActivity(accountActs.AccountUpdate, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req accountact.AccountRequest) (accountapi.View, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.accountReqs = append(c.accountReqs, req)
			if req.Join != nil && c.joinErr != nil {
				return accountapi.View{}, c.joinErr
			}
			return c.join, nil
		})
	env.OnActivity(slotActs.AcquireSlot, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req slotact.AcquireSlotRequest) (slots.Answer, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.acquires = append(c.acquires, req.Request.Key)
			return slots.Answer{State: slots.Granted}, nil
		})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", slotapi.SignalRelease, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.releases = append(c.releases, arg.(slotapi.ReleaseSignal).Key)
			return nil
		})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", accountapi.SignalLeave, mock.Anything).Return(
		func(_, wid, _, _ string, arg any) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.leaves = append(c.leaves, wid)
			return nil
		})
	env.OnActivity(acts.ClaimHost, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.ClaimHostRequest) (taskact.ClaimHostResult, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.claims = append(c.claims, req)
			if !req.JoinAccount {
				return taskact.ClaimHostResult{}, nil
			}
			if c.claimNotice != nil {
				env.SignalWorkflowSkippingWorkflowTask(accountapi.SignalNotice, *c.claimNotice)
			}
			return c.claim, nil
		})
	env.OnActivity(acts.StartAttempt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.StartAttemptRequest) (taskact.StartAttemptResult, error) {
			info, err := f.prepare(taskact.PrepareRequest{Dispatch: req.Dispatch, Attempt: req.Attempt})
			if err != nil {
				return taskact.StartAttemptResult{}, err
			}
			c.mu.Lock()
			c.startedAt = append(c.startedAt, env.Now())
			c.mu.Unlock()
			h := taskact.ConductorHandle{PID: 100, PGID: 100}
			d := taskact.DeliverResult{Brief: mapping.NewBriefState(req.Dispatch.TaskID, info.Summary),
				LimitWatch: taskact.LimitWatch{WatchLimits: true, Limit: c.ownLimit}}
			if c.ownLimit != nil {
				d.Exited = true
			}
			return taskact.StartAttemptResult{Plan: info, Conductor: &h, Delivery: &d}, nil
		})
	env.OnActivity(acts.InterruptConductor, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ taskact.InterruptRequest) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.interrupted = append(c.interrupted, env.Now())
			c.stopped = true
			return nil
		})
	env.OnActivity(acts.AbortConductor, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ taskact.AbortRequest) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.stopped = true
			return nil
		})
	env.OnActivity(acts.ResumeConductor, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ taskact.ResumeRequest) (taskact.ResumeResult, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.resumedAt = append(c.resumedAt, env.Now())
			c.stopped, c.sinceResume = false, 0
			return taskact.ResumeResult{Conductor: &taskact.ConductorHandle{PID: 200, PGID: 200}}, nil
		})
	env.OnActivity(acts.DeliverEvents, mock.Anything, mock.Anything).AfterFn(func() time.Duration {
		if c.deliverEvery > 0 {
			return c.deliverEvery
		}
		return time.Second
	}).Return(
		func(_ context.Context, req taskact.DeliverRequest) (taskact.DeliverResult, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			res := taskact.DeliverResult{Brief: req.Brief, LimitWatch: taskact.LimitWatch{WatchLimits: true}}
			cost := c.costUSD
			if c.costAfterResume > 0 && len(c.resumedAt) > 0 {
				cost = c.costAfterResume
			}
			if cost > 0 {
				res.Brief = req.Brief.Clone()
				res.Brief.Brief.Cost.ByPhase = map[string]float64{res.Brief.PhaseOrder[0]: cost}
			}
			c.sinceResume++
			switch {
			case c.stopped:
				res.Exited = true // gone on SIGINT, its phase back to pending
			case !c.limitAt.IsZero() && !c.limitMet && !env.Now().Before(c.limitAt):
				c.limitMet = true
				res.Exited = true
				res.Limit = &taskact.UsageLimit{Phase: "test", ResetAt: env.Now().Add(c.limitReset).UTC(), Source: "sign:rate_limit_event"}
			case (len(c.resumedAt) > 0 && len(c.resumedAt) >= c.completeAfterResumes && c.sinceResume > c.runFor) || c.completeAtOnce:
				o := mapping.CompletedOutcome()
				res.Outcome, res.Exited = &o, true
			}
			return res, nil
		})
	env.OnActivity(acts.PatchBrief, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(acts.Notify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.NotifyRequest) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.notes = append(c.notes, req.Kind+": "+req.Reason)
			return nil
		})
	env.OnActivity(acts.SetTaskStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.StatusRequest) error {
			if c.onStatus != nil {
				c.onStatus(req.Update)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.statuses = append(c.statuses, req.Update.Status)
			c.updates = append(c.updates, req.Update)
			if req.LeaveAccount != "" {
				c.statusLeaves = append(c.statusLeaves, req.LeaveAccount)
			}
			return nil
		})
}

func newAccountRig(t *testing.T) (*testsuite.TestWorkflowEnvironment, *accountRig) {
	env := newEnv(t)
	c := &accountRig{t: t, env: env}
	c.register()
	return env, c
}

// Another task on the account met a usage limit: this one's conductor is
// interrupted at once, the task pauses until the account's moment, and
// resumes the same plan as the same attempt.
func TestAccountNoticePausesARunningTask(t *testing.T) {
	env, c := newAccountRig(t)
	start := env.Now()
	until := start.Add(time.Hour).UTC()
	var paused taskapi.Status
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(accountapi.SignalNotice, accountapi.Notice{Account: "team", Until: until, By: "T9", Phase: "implement", Text: "You've hit your limit"})
	}, 10*time.Second)
	pausedStatus(t, env, &paused)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Account: "team"})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))

	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Equal(t, 1, res.Attempt, "an account's pause counts no attempt")
	require.Len(t, c.startedAt, 1)
	require.NotEmpty(t, c.interrupted)
	require.Less(t, c.interrupted[0].Sub(start), 12*time.Second, "interrupted at once, not at the next checkpoint")
	require.Len(t, c.resumedAt, 1)
	require.False(t, c.resumedAt[0].Before(until), "resumed at %v, the account's pause until %v", c.resumedAt[0], until)
	require.Equal(t, "team", c.accountReqs[0].Account)
	require.NotNil(t, c.accountReqs[0].Join, "the task joined its account before it started")
	require.Len(t, c.accountReqs, 1, "a pause told by the account is not reported back")
	require.NotContains(t, c.statuses, mapping.TaskBlocked)
	require.Equal(t, taskapi.StagePaused, paused.Stage)
	require.Equal(t, "team", paused.Pause.Account)
	require.Equal(t, "T9", paused.Pause.By)
	require.Equal(t, until, paused.Pause.Until.UTC())
	require.Contains(t, c.notes[0], "paused: usage limit in phase")
	require.Contains(t, c.notes[0], "on account team (met by task T9)")
	require.Equal(t, []string{"karvi-account-team"}, c.leaves, "the task leaves its account when it ends")
}

// An attempt that would start while its account is paused waits for the
// account's moment before anything starts.
func TestAccountPauseHoldsANewAttempt(t *testing.T) {
	env, c := newAccountRig(t)
	until := env.Now().Add(2 * time.Hour).UTC()
	c.join = accountapi.View{Account: "team", PausedUntil: until, Paused: true, By: "T9"}
	c.completeAtOnce = true
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Account: "team"})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Len(t, c.startedAt, 1)
	require.False(t, c.startedAt[0].Before(until), "started at %v, the account paused until %v", c.startedAt[0], until)
	require.Empty(t, c.resumedAt, "nothing to resume: the attempt had not started")
	require.Len(t, c.accountReqs, 1, "joined once")
}

// A task whose own agent meets the limit reports it to its account, so
// that the other tasks on it pause too.
func TestOwnLimitIsReportedToTheAccount(t *testing.T) {
	env, c := newAccountRig(t)
	reset := env.Now().Add(time.Hour).UTC()
	c.ownLimit = &taskact.UsageLimit{Phase: "test", ResetAt: reset, Source: "sign:rate_limit_event", Text: "You've hit your limit"}
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Account: "team",
		Tuning: &taskapi.Tuning{PauseMargin: time.Minute}})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, c.accountReqs, 2)
	lim := c.accountReqs[1].Limit
	require.NotNil(t, lim)
	require.Equal(t, "T5", lim.Task)
	require.Equal(t, reset.Add(time.Minute), lim.Until.UTC())
	require.Equal(t, "test", lim.Phase)
	require.NotEmpty(t, c.accountReqs[1].UpdateID)
}

// A paused task gives its agent slot back and asks for one again, under
// a key of its own, before it resumes.
func TestPausedTaskGivesItsSlotBack(t *testing.T) {
	env, c := newAccountRig(t)
	reset := env.Now().Add(time.Hour).UTC()
	c.ownLimit = &taskact.UsageLimit{Phase: "test", ResetAt: reset, Source: "sign:rate_limit_event"}
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Slots: &taskapi.SlotRequest{Pool: "solo"},
		Tuning: &taskapi.Tuning{PauseMargin: time.Minute}})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Len(t, c.acquires, 2, "a slot before the start and again before the resume")
	require.NotEqual(t, c.acquires[0], c.acquires[1])
	require.Equal(t, []slots.Key{c.acquires[0], c.acquires[1]}, c.releases, "given back when paused, and when the attempt ended")
	require.Equal(t, "solo", c.accountReqs[0].Account, "the pool names the account when no account is given")
}

// Bad account keys are refused before anything starts.
func TestBadAccountIsRefused(t *testing.T) {
	env, _ := newAccountRig(t)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Account: "no spaces"})
	require.ErrorContains(t, env.GetWorkflowError(), `invalid account: account "no spaces"`)
}

// A budget whose action is pause stops the conductor gracefully at 100 %
// and waits, with no end of its own, until the budget is raised; then the
// same plan goes on as the same attempt.
func TestBudgetPauseWaitsForARaisedBudget(t *testing.T) {
	env, c := newAccountRig(t)
	c.costUSD = 1.5
	var st taskapi.Status
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(taskapi.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&st))
		env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 1.2}) // still spent: stays paused
	}, 10*time.Hour)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: 5})
	}, 20*time.Hour)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t),
		Budget: &costs.Budget{LimitUSD: 1, Action: costs.Pause}})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Equal(t, 1, res.Attempt)
	require.NotEmpty(t, c.interrupted, "stopped gracefully")
	require.Len(t, c.resumedAt, 1)
	require.False(t, c.resumedAt[0].Before(c.startedAt[0].Add(20*time.Hour)), "resumed only once the budget was raised")
	require.Equal(t, taskapi.StagePaused, st.Stage)
	require.Equal(t, taskapi.PausedBudget, st.Pause.Reason)
	require.Contains(t, st.Pause.Budget, "Budget exceeded")
	require.NotContains(t, c.statuses, mapping.TaskBlocked)
	require.Contains(t, c.notes[len(c.notes)-1], "resumed: budget raised to $5.00")
}

// starter resume ends a budget pause too.
func TestBudgetPauseEndsOnResume(t *testing.T) {
	env, c := newAccountRig(t)
	c.costUSD = 1.5
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalResume, taskapi.ResumeSignal{Reason: "go on"}) }, time.Hour)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t),
		Budget: &costs.Budget{LimitUSD: 1, Action: costs.Pause}})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Len(t, c.resumedAt, 1)
}

// The sink hears of the pause and the resume as the task's dispatch result,
// its status unchanged: a pause is no failure.
func TestPauseIsShownInTheSinkNotAsAFailure(t *testing.T) {
	env, c := newAccountRig(t)
	reset := time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC)
	env.SetStartTime(reset.Add(-time.Hour))
	c.ownLimit = &taskact.UsageLimit{Phase: "test", ResetAt: reset, Source: "sign:rate_limit_event"}
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Tuning: &taskapi.Tuning{PauseMargin: 2 * time.Minute}})
	require.NoError(t, env.GetWorkflowError())
	var states []string
	for _, u := range c.updates {
		states = append(states, string(u.Status)+"/"+string(u.DispatchState)+": "+u.Reason)
	}
	require.Len(t, states, 3, "%q", states)
	require.Equal(t, "dispatched/paused: paused: usage limit in phase test, resumes at 15:02:00 UTC", states[0])
	require.Equal(t, "dispatched/dispatching: resumed: the limit's reset passed", states[1])
	require.Equal(t, "completed/completed: ", states[2])
}

// workerAccount is the claim of a worker whose account is "default.q".
func workerAccount(v accountapi.View) taskact.ClaimHostResult {
	v.Account = "default.q"
	return taskact.ClaimHostResult{Account: "default.q", Joined: &v}
}

// A task that names no account and no pool runs on its worker's: the
// claim of its host joins it (no join of its own), and a notice of that
// account pauses it like any member.
func TestTaskWithoutAccountJoinsTheWorkersAccount(t *testing.T) {
	env, c := newAccountRig(t)
	c.claim = workerAccount(accountapi.View{})
	until := env.Now().Add(time.Hour).UTC()
	var paused taskapi.Status
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(accountapi.SignalNotice, accountapi.Notice{Account: "default.q", Until: until, By: "T9", Phase: "implement"})
	}, 10*time.Second)
	pausedStatus(t, env, &paused)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.NotEmpty(t, c.claims)
	require.True(t, c.claims[0].JoinAccount, "the claim joins the worker's account")
	require.Empty(t, c.accountReqs, "no join of its own")
	require.NotEmpty(t, c.interrupted)
	require.Len(t, c.resumedAt, 1)
	require.False(t, c.resumedAt[0].Before(until))
	require.Equal(t, "default.q", paused.Pause.Account)
	require.Empty(t, c.leaves, "no signal of its own to leave")
	require.Equal(t, []string{"default.q"}, c.statusLeaves, "the task leaves the worker's account with its last status write")
}

// A task on its worker's account that meets a limit reports it there.
func TestOwnLimitIsReportedToTheWorkersAccount(t *testing.T) {
	env, c := newAccountRig(t)
	c.claim = workerAccount(accountapi.View{})
	c.ownLimit = &taskact.UsageLimit{Phase: "test", ResetAt: env.Now().Add(time.Hour).UTC(), Source: "sign:rate_limit_event"}
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, c.accountReqs, 1)
	require.Equal(t, "default.q", c.accountReqs[0].Account)
	require.NotNil(t, c.accountReqs[0].Limit)
}

// A claim that finds the worker's account paused holds the attempt until
// the account's moment: nothing starts before.
func TestWorkersAccountPauseHoldsANewAttempt(t *testing.T) {
	env, c := newAccountRig(t)
	until := env.Now().Add(2 * time.Hour).UTC()
	c.claim = workerAccount(accountapi.View{PausedUntil: until, Paused: true, By: "T9"})
	c.completeAtOnce = true
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Len(t, c.startedAt, 1)
	require.False(t, c.startedAt[0].Before(until), "started at %v, the account paused until %v", c.startedAt[0], until)
	require.Len(t, c.claims, 2, "claimed again after the hold")
	require.False(t, c.claims[1].JoinAccount, "a member already: the task does not join again")
	require.Empty(t, c.resumedAt)
}

// A task's own account or pool wins over its worker's.
func TestOwnAccountOrPoolWinsOverTheWorkers(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   taskapi.TaskInput
		want string
	}{
		{"account", taskapi.TaskInput{Account: "team"}, "team"},
		{"pool", taskapi.TaskInput{Slots: &taskapi.SlotRequest{Pool: "solo"}}, "solo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, c := newAccountRig(t)
			c.claim = workerAccount(accountapi.View{})
			c.completeAtOnce = true
			in := tc.in
			in.Dispatch = exampleDispatch(t)
			env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
			require.NoError(t, env.GetWorkflowError())
			require.NotEmpty(t, c.claims)
			require.False(t, c.claims[0].JoinAccount)
			require.Equal(t, tc.want, c.accountReqs[0].Account)
			require.Equal(t, []string{"karvi-account-" + tc.want}, c.leaves)
			require.Empty(t, c.statusLeaves)
		})
	}
}

// A worker whose account cannot be reached leaves the task alone, as an
// account a task cannot reach does: it starts, and its own limit is still
// reported to the account.
func TestWorkersAccountNotReached(t *testing.T) {
	env, c := newAccountRig(t)
	c.claim = taskact.ClaimHostResult{Account: "default.q", AccountProblem: "no server"}
	c.completeAtOnce = true
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, c.startedAt, 1)
	require.Empty(t, c.leaves, "never joined: nothing to leave")
	require.Empty(t, c.statusLeaves, "never joined: nothing to leave")
}

// A claim whose join went to the worker's account but whose read of the
// account's pause ran out of time leaves the task a member of it: the
// task leaves with its last status write, as any member does, so the
// account never signals a later workflow of the task.
func TestWorkersAccountJoinedUnreadLeavesAtTheEnd(t *testing.T) {
	env, c := newAccountRig(t)
	c.claim = taskact.ClaimHostResult{Account: "default.q", JoinSent: true,
		AccountProblem: "read account default.q: context deadline exceeded"}
	c.completeAtOnce = true
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Len(t, c.startedAt, 1, "an unread pause does not hold the start")
	require.Empty(t, c.leaves, "no signal of its own to leave")
	require.Equal(t, []string{"default.q"}, c.statusLeaves, "the member leaves with its last status write")
}

// The account tells a member that joins while it is paused so; a claim
// whose read of the pause ran out of time takes that notice, when it came
// with the claim's answer, before anything starts.
func TestWorkersAccountJoinedUnreadTakesThePauseTheAccountSent(t *testing.T) {
	env, c := newAccountRig(t)
	until := env.Now().Add(2 * time.Hour).UTC()
	c.claim = taskact.ClaimHostResult{Account: "default.q", JoinSent: true,
		AccountProblem: "read account default.q: context deadline exceeded"}
	c.claimNotice = &accountapi.Notice{Account: "default.q", Until: until, By: "T9", Phase: "implement"}
	c.completeAtOnce = true
	var paused taskapi.Status
	pausedStatus(t, env, &paused)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.NotNil(t, paused.Pause, "held on the account's pause")
	require.Equal(t, "T9", paused.Pause.By)
	require.Len(t, c.startedAt, 1)
	require.False(t, c.startedAt[0].Before(until), "started at %v, the account paused until %v", c.startedAt[0], until)
	require.Empty(t, c.interrupted, "nothing started to interrupt")
	require.Equal(t, []string{"default.q"}, c.statusLeaves)
}

// A task's own join whose read of the account's pause failed every time
// leaves the task a member all the same: it leaves when the attempt ends.
func TestOwnAccountJoinedUnreadLeavesAtTheEnd(t *testing.T) {
	env, c := newAccountRig(t)
	c.joinErr = temporal.NewApplicationError("joined account team, its pause not read: context deadline exceeded",
		accountapi.ErrJoinedUnread)
	c.completeAtOnce = true
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Account: "team"})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Len(t, c.startedAt, 1)
	require.Equal(t, []string{"karvi-account-team"}, c.leaves)
}
