package taskflow

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
)

// An agent account's usage limit holds for every task whose conductors
// run on that account: when one of them meets it, the others would meet it
// within seconds (and the conductor would spend their attempts on it, or
// pass a phase with no work done). So a task on an account (TaskInput.
// Account, else its slot pool's name) joins the account's workflow
// (AccountWorkflow) before each attempt starts, and:
//
//   - a task that meets a limit reports it; the account tells every other
//     member, which stops its conductor with SIGINT at once (the phase
//     under way goes back to pending, passed phases stay passed) and
//     pauses until the same moment, resuming the same plan;
//   - an attempt that would start while the account is paused waits
//     until the pause ends before it starts (or takes a slot);
//   - `starter account resume` ends the account's pause for every member;
//     `starter resume` of one task ends only that task's pause.
//
// A paused task also gives its agent slot back and takes one again before
// it resumes.

// accountKey is the task's agent account, "" for none.
func (r *taskRun) accountKey() string {
	if r.st.Account != "" {
		return r.st.Account
	}
	if r.st.Slots != nil {
		return r.st.Slots.PoolOrDefault()
	}
	return ""
}

// useAccount says whether this run of the workflow shares its account's
// pauses.
func (r *taskRun) useAccount() bool {
	if !r.limitsOn || r.accountKey() == "" {
		return false
	}
	if workflow.GetVersion(r.ctx, versionAccountPause, workflow.DefaultVersion, 1) != 1 {
		return false
	}
	r.accountCh = workflow.GetSignalChannel(r.ctx, accountapi.SignalNotice)
	return true
}

// A task that names no account and no slot pool runs on its worker's
// agent account (the worker's -account, by default one per task queue):
// the claim of its first attempt's host (ClaimHost) joins it there and
// says which account that is, so the account costs such a task no command
// of its own but the leave at the end. The decision rests on the claim's
// recorded result, so it replays as it ran; a claim recorded before (no
// account in it) leaves the task alone, as then.

// wantsWorkersAccount says whether the next claim joins the task to its
// worker's account: usage limits followed, and no account yet.
func (r *taskRun) wantsWorkersAccount() bool {
	return r.limitsOn && !r.accountOn && r.accountKey() == ""
}

// adoptWorkersAccount makes the worker's account, when the claim names
// one, the task's, and holds the attempt when the join found it paused
// (true: held).
func (r *taskRun) adoptWorkersAccount(claim taskact.ClaimHostResult) bool {
	if !r.wantsWorkersAccount() || claim.Account == "" || accountapi.ValidName(claim.Account) != nil {
		return false
	}
	a := &r.st.Current
	r.st.Account = claim.Account
	r.st.WorkersAccount = true
	r.accountOn = true
	r.accountCh = workflow.GetSignalChannel(r.ctx, accountapi.SignalNotice)
	a.AccountChecked, a.AccountJoined = true, claim.Joined != nil
	if claim.Joined == nil {
		if claim.JoinSent && r.joinedUnread() {
			// A member whose pause is unknown: it leaves at the end like
			// any member, and takes the pause the account sends a member
			// joining while it is paused, if that came already; a later
			// one interrupts the conductor as any notice does.
			a.AccountJoined = true
			r.log.Warn("agent account joined, its pause not read", "account", claim.Account, "error", claim.AccountProblem)
			if n := r.takeAccountNotice(); n != nil {
				r.holdForAccount(*n)
				return true
			}
			return false
		}
		r.log.Warn("agent account not reached", "account", claim.Account, "what", "join", "error", claim.AccountProblem)
		return false
	}
	r.log.Info("the task runs on its worker's agent account", "account", claim.Account)
	v := claim.Joined
	if v.PausedUntil.After(workflow.Now(r.ctx)) {
		r.holdForAccount(accountapi.Notice{Account: v.Account, Until: v.PausedUntil, ResetAt: v.ResetAt,
			By: v.By, Phase: v.Phase, Source: v.Source, Text: v.Text})
		return true
	}
	return false
}

// joinedUnread says whether this run of the workflow takes a join whose
// read failed as a membership. Asked only when such a join happened, so
// histories without one record no marker.
func (r *taskRun) joinedUnread() bool {
	return workflow.GetVersion(r.ctx, versionJoinedUnread, workflow.DefaultVersion, 1) == 1
}

// accountOptions: the account answers at once; an account workflow that
// cannot be reached does not hold a task up for long.
func accountOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        5 * time.Second,
			MaximumAttempts:        6,
			NonRetryableErrorTypes: []string{accountapi.ErrBadAccount},
		},
	})
}

func (r *taskRun) accountUpdate(req accountapi.AccountRequest, what string) (accountapi.View, bool) {
	v, err := r.accountUpdateErr(req, what)
	return v, err == nil
}

// accountUpdateErr is accountUpdate with the activity's error.
func (r *taskRun) accountUpdateErr(req accountapi.AccountRequest, what string) (accountapi.View, error) {
	req.Account = r.accountKey()
	var v accountapi.View
	err := workflow.ExecuteActivity(accountOptions(r.ctx, fmt.Sprintf("%s on account %s", what, req.Account)),
		accountapi.ActivityAccountUpdate, req).Get(r.ctx, &v)
	if err != nil {
		// The task goes on alone: a pause it meets is still its own.
		r.log.Warn("agent account not reached", "account", req.Account, "what", what, "error", err)
	}
	return v, err
}

// mayHaveJoined: a join activity that failed this way may have made the
// task a member: its signal went and the read failed, or it timed out
// with the signal on its way.
func mayHaveJoined(err error) bool {
	var timeout *temporal.TimeoutError
	return accountapi.JoinedUnread(err) || errors.As(err, &timeout)
}

// checkAccount joins the account before the attempt starts, and holds the
// attempt while the account is paused.
func (r *taskRun) checkAccount() error {
	a := &r.st.Current
	r.takeAccountNotice() // the join's answer says what they said
	v, err := r.accountUpdateErr(accountapi.AccountRequest{Join: &accountapi.JoinRequest{
		Member: workflow.GetInfo(r.ctx).WorkflowExecution.ID}}, "join")
	ok := err == nil
	a.AccountChecked, a.AccountJoined = true, ok
	if !ok && mayHaveJoined(err) && r.joinedUnread() {
		// Joined, or may have, with the pause unread: see
		// adoptWorkersAccount. A later notice stops the attempt as any
		// notice does.
		a.AccountJoined = true
		if n := r.takeAccountNotice(); n != nil {
			r.holdForAccount(*n)
		}
		return nil
	}
	if ok && v.PausedUntil.After(workflow.Now(r.ctx)) {
		r.holdForAccount(accountapi.Notice{Account: v.Account, Until: v.PausedUntil, ResetAt: v.ResetAt,
			By: v.By, Phase: v.Phase, Source: v.Source, Text: v.Text})
	}
	return nil
}

// takeAccountNotice takes the notices already delivered and returns the
// last pause among them still ahead, nil when none.
func (r *taskRun) takeAccountNotice() *accountapi.Notice {
	var pause *accountapi.Notice
	for {
		var n accountapi.Notice
		if !r.accountCh.ReceiveAsync(&n) {
			return pause
		}
		switch {
		case n.Resume:
			pause = nil
		case n.Until.After(workflow.Now(r.ctx)):
			pause = &n
		}
	}
}

// holdForAccount pauses an attempt that has not started its conductor.
func (r *taskRun) holdForAccount(n accountapi.Notice) {
	now := workflow.Now(r.ctx)
	r.st.Pauses++
	r.enterPause(&taskapi.Pause{
		Reason: taskapi.PausedUsageLimit, Phase: n.Phase, Since: now, Until: n.Until, ResetAt: n.ResetAt,
		Source: n.Source, Text: n.Text, Count: r.st.Pauses, Account: r.accountKey(), By: n.By,
	})
}

// reportLimit tells the account of the limit this task met, so that the
// other tasks on it pause too.
func (r *taskRun) reportLimit(p *taskapi.Pause) {
	if !r.accountOn {
		return
	}
	id := workflow.GetInfo(r.ctx).WorkflowExecution.ID
	r.accountUpdate(accountapi.AccountRequest{
		UpdateID: fmt.Sprintf("limit/%s/%d", id, p.Count),
		Limit: &accountapi.LimitRequest{Member: id, Task: r.st.Dispatch.TaskID, Until: p.Until,
			ResetAt: p.ResetAt, Phase: p.Phase, Source: p.Source, Text: p.Text},
	}, "limit")
}

// leaveWithStatus is the account a task on its worker's account leaves
// with its attempt's last status write (no signal of its own), and takes
// the membership as ended; "" for none. Only such tasks, whose histories
// all come after this, leave so: a task with its own account or pool
// signals, as its recorded histories do.
func (r *taskRun) leaveWithStatus() string {
	a := &r.st.Current
	if !r.accountOn || !r.st.WorkersAccount || !a.AccountJoined {
		return ""
	}
	a.AccountJoined = false
	return r.st.Account
}

// leaveAccount ends the task's membership when an attempt ends.
func (r *taskRun) leaveAccount() {
	if !r.accountOn || !r.st.Current.AccountJoined {
		return
	}
	id := workflow.GetInfo(r.ctx).WorkflowExecution.ID
	err := workflow.SignalExternalWorkflow(r.ctx, accountapi.WorkflowID(r.accountKey()), "", accountapi.SignalLeave,
		accountapi.LeaveSignal{Member: id}).Get(r.ctx, nil)
	if err != nil {
		r.log.Warn("account not told the task left", "account", r.accountKey(), "error", err)
	}
}

// giveSlotBack releases a paused attempt's slot; the attempt asks for a
// new one, under a key of its own, before it resumes.
func (r *taskRun) giveSlotBack() {
	a := &r.st.Current
	if !r.accountOn || a.Slot == nil || !a.Slot.Held || a.Slot.Released {
		return
	}
	r.releaseSlot("paused")
	a.Slot = nil
	a.SlotRound++
}

// accountWords is what the brief and the webhook say of whose limit it is.
func accountWords(p *taskapi.Pause) string {
	if p.Account == "" {
		return ""
	}
	if p.By != "" {
		return fmt.Sprintf(" on account %s (met by task %s)", p.Account, p.By)
	}
	return " on account " + p.Account
}
