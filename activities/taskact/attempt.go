package taskact

import (
	"context"
	"errors"
	"os"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/mapping"
)

// ClaimHostRequest asks for a host to start an attempt of a task on.
type ClaimHostRequest struct {
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
	// JoinAccount: the task names no agent account of its own, so it
	// runs on the worker's (Config.Account): the claim joins the task to
	// that account's workflow and says which account it is, so the task
	// learns its account with no command of its own.
	JoinAccount bool `json:"joinAccount,omitempty"`
}

// ClaimHostResult names the host that takes the attempt.
type ClaimHostResult struct {
	Host string `json:"host"`
	// Account is the worker's agent account, when the claim was asked to
	// join it; empty when the worker has none.
	Account string `json:"account,omitempty"`
	// Joined is the account as the join left it; nil when the account
	// could not be reached (AccountProblem says why): the task then goes
	// on alone, as a task whose account cannot be reached does.
	Joined         *accountapi.View `json:"joined,omitempty"`
	AccountProblem string           `json:"accountProblem,omitempty"`
	// JoinSent: Joined is nil, but the join's signal went to the account
	// (or ran out of time on the way, and may have): the task is, or may
	// be, a member, and must leave at the end, though the account's pause
	// was not read. An account paused when the join reaches it tells the
	// new member so (accountapi.SignalJoin).
	JoinSent bool `json:"joinSent,omitempty"`
}

// joinWait bounds the join a claim makes: an account whose workflow no
// worker serves (one named by workers of several queues, whose first queue
// has none left) must not keep the task from starting; it goes on alone.
var joinWait = 10 * time.Second

// ClaimHost is taken on the shared queue by a worker whose host has room
// (the worker's gate hands it back otherwise) and names that host: the
// attempt's start then goes to the host's own queue, where a retried start
// re-attaches to the conductor an earlier try left instead of another host
// starting a second one.
func (a *Activities) ClaimHost(ctx context.Context, req ClaimHostRequest) (ClaimHostResult, error) {
	res := ClaimHostResult{Host: a.Config.Host}
	if !req.JoinAccount || a.Config.Account == "" || a.Accounts == nil {
		return res, nil
	}
	res.Account = a.Config.Account
	jctx, cancel := context.WithTimeout(ctx, joinWait)
	defer cancel()
	info := activity.GetInfo(ctx)
	v, err := a.Accounts.Join(jctx, info.TaskQueue, res.Account, accountapi.JoinRequest{Member: info.WorkflowExecution.ID})
	if err != nil {
		res.AccountProblem = err.Error()
		res.JoinSent = accountapi.JoinedUnread(err)
		return res, nil
	}
	res.Joined = &v
	return res, nil
}

// StartAttemptRequest begins one attempt of a task.
type StartAttemptRequest struct {
	Dispatch mapping.DispatchPlan `json:"dispatch"`
	Attempt  int                  `json:"attempt"`
	// Nonce is the workflow chain's, as for PrepareRequest.
	Nonce string `json:"nonce,omitempty"`
	// Base carries the dispatch's plan id and the workflow's time for the
	// status writes.
	Base TaskStatusUpdate `json:"base"`
	// MaxWait and CheckpointEvery bound the first delivery, which follows
	// the conductor from its first line (see DeliverRequest).
	MaxWait         time.Duration `json:"maxWait,omitempty"`
	CheckpointEvery time.Duration `json:"checkpointEvery,omitempty"`
	// Stream is the task's event stream, as for DeliverRequest; its steps
	// are stored once the plan is written, before anything else.
	Stream *StreamInfo `json:"stream,omitempty"`
	// WatchLimits: the first delivery follows the transcripts too (limits.go).
	WatchLimits bool `json:"watchLimits,omitempty"`
	// SpendEachPhase is the first delivery's, as for DeliverRequest.
	SpendEachPhase bool `json:"spendEachPhase,omitempty"`
}

// StartAttemptResult is what the workflow keeps of a started attempt.
type StartAttemptResult struct {
	Plan PlanInfo `json:"plan"`
	// Conductor is the running conductor; nil when it could not start, and
	// StartError then says why (the attempt ends as a crash).
	Conductor  *ConductorHandle `json:"conductor,omitempty"`
	StartError string           `json:"startError,omitempty"`
	// SinkProblem is the sink's refusal of the skeleton (no brief for the
	// task): the attempt goes on, the brief stays queryable.
	SinkProblem string `json:"sinkProblem,omitempty"`
	// Delivery is the first checkpoint of the attempt's delivery, which
	// began with the skeleton; nil from a worker that did not deliver.
	Delivery *DeliverResult `json:"delivery,omitempty"`
	// Host is the host the conductor runs on (Config.Host), where every
	// later activity of the attempt must go; empty from a worker without
	// one.
	Host string `json:"host,omitempty"`
	// NotRun says why the attempt was not run at all: the board said, at
	// its first status write, that the task was cancelled there or is
	// gone. No conductor runs (one an earlier try spawned was stopped);
	// Conductor is nil and StartError says the same, for a workflow that
	// knows nothing of NotRun.
	NotRun string `json:"notRun,omitempty"`
}

// StartAttempt does the steps that begin an attempt, in order: plan.yaml
// on disk, the brief's skeleton, the task dispatched, the conductor
// spawned; then it delivers the conductor's events from its first line
// until the first checkpoint. Beginning delivery here, not in a later
// activity, means the first events are not held back while the workflow
// schedules one. One activity instead of five keeps history short.
//
// A retry after a crash redoes the idempotent steps and re-attaches to the
// conductor already running, but sends nothing the sink already has: when
// the sink's brief shows the skeleton or a later state of this attempt,
// the skeleton is not sent again (it would take the brief back to empty),
// nor the dispatched status once events were delivered (karvi may already
// say in_progress), and delivery resumes after the last patch it shows.
func (a *Activities) StartAttempt(ctx context.Context, req StartAttemptRequest) (StartAttemptResult, error) {
	stopBeat := activities.Heartbeat(ctx, activities.HeartbeatEvery)
	defer stopBeat()
	defer sink.Attend(a.Sink)()
	info, err := a.PreparePlan(ctx, PrepareRequest{Dispatch: req.Dispatch, Attempt: req.Attempt, Nonce: req.Nonce})
	if err != nil {
		return StartAttemptResult{}, err
	}
	res := StartAttemptResult{Plan: info, Host: a.Config.Host}
	taskID := req.Dispatch.TaskID
	base := req.Base
	base.PlanName = info.Summary.Name
	skeleton := mapping.NewBriefState(taskID, info.Summary)
	d := &delivery{
		a: a, explain: a.explainer(info.PlanPath), brief: skeleton.Clone(),
		req: DeliverRequest{TaskID: taskID, Plan: info, TaskStatus: mapping.TaskDispatched, Base: base,
			MaxWait: req.MaxWait, CheckpointEvery: req.CheckpointEvery, Stream: req.Stream, SpendEachPhase: req.SpendEachPhase,
			Job:        a.newTally(info, req.Attempt, req.Dispatch.ModelHint, false),
			LimitWatch: LimitWatch{WatchLimits: req.WatchLimits}},
	}
	if err := d.appendSteps(ctx); err != nil {
		return StartAttemptResult{}, err
	}
	a.traceSteps(ctx, req.Stream, taskID, base.PlanID)
	sendSkeleton, sendStatus := true, true
	// A retry, or a start of an attempt whose conductor already wrote
	// events (it starts only after the skeleton and the dispatched status
	// went out), resumes from what the sink shows instead of starting over.
	retried := activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt > 1 || conductorStarted(info)
	// What the sink holds decides what is sent: on a retry, how far the
	// earlier try got; otherwise whether an earlier brief must be wiped.
	// A first try while the sink is congested (karvi's rate limit) skips
	// the read and replaces the brief whole instead, when the sink can:
	// one request, where a read and a patch that nulls the earlier
	// brief's fields are two. That replacement is held, like the patches
	// that wait their turn, and merged with the events' patches that
	// follow: a short task's brief then costs one request in all.
	replace := !retried && sink.Congested(a.Sink) && sink.CanReplace(a.Sink)
	var held map[string]any
	if !replace {
		var err error
		if held, err = d.held(ctx); err != nil {
			return StartAttemptResult{}, err
		}
	}
	if retried {
		n, matched, err := d.deliveredIn(held)
		if err != nil {
			return StartAttemptResult{}, err
		}
		if matched {
			sendSkeleton, sendStatus, d.skip = false, n == 0, n
		}
		if conductorStarted(info) {
			// The task may say in_progress already: dispatched would take
			// it back (and karvi dispatches a task that comes back to
			// dispatched). Delivery writes in_progress again at the first
			// phase start it reads, sent or skipped.
			sendStatus = false
		}
	}
	if sendSkeleton {
		d.brief.ForgetHeld(held)
		skeleton := d.enc.Init(&d.brief)
		var err error
		if replace {
			// Sent with the first checkpoint at the latest (finish), or
			// once karvi is no longer congested; until then karvi shows
			// the task's status with its earlier brief.
			err = d.hold.HoldWhole(skeleton.Body)
		} else {
			// Otherwise the conductor starts after the skeleton, which
			// waits its turn at karvi's rate limit with the status writes,
			// not the brief updates; unless karvi became congested since
			// the read, and the skeleton is held like any patch.
			err = d.patch(karvi.Urgent(ctx), skeleton)
		}
		if err != nil {
			return StartAttemptResult{}, err
		}
	}
	res.SinkProblem = d.res.SinkProblem
	if sendStatus {
		u := base
		u.Status, u.DispatchState = mapping.TaskDispatched, mapping.DispatchStateFor(mapping.PlanPending)
		err := d.retry(ctx, func() error { return a.Sink.SetStatus(ctx, taskID, u.sink()) })
		if why := notRunWhy(err); why != "" {
			return a.notRun(ctx, d, res, why)
		}
		var appErr *temporal.ApplicationError
		switch {
		case err == nil:
		case retried && errors.As(err, &appErr) && appErr.NonRetryable():
			// An earlier try may have started the conductor already: failing
			// now would leave it running with no workflow to stop it. The
			// refusal is recorded, and the attempt goes on as it would after
			// a refused patch.
			d.res.SinkProblem = err.Error()
			res.SinkProblem = err.Error()
		default:
			return StartAttemptResult{}, err
		}
	}
	if err := a.stopEarlierAttempts(ctx, taskID, info.Summary.Name); err != nil {
		return StartAttemptResult{}, err
	}
	h, err := a.StartConductor(ctx, StartRequest{Plan: info})
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == ErrConductorStart {
		// The attempt ends here: a held skeleton goes now, so that the
		// patch that settles the attempt applies to it.
		if err := d.flush(ctx); err != nil {
			return StartAttemptResult{}, err
		}
		res.SinkProblem = d.res.SinkProblem
		res.StartError = appErr.Message()
		return res, nil
	}
	if err != nil {
		return StartAttemptResult{}, err
	}
	res.Conductor = &h
	d.req.Handle = h
	if d.hold.Held() > 0 && d.req.CheckpointEvery > 0 {
		// The skeleton waits its turn (karvi is congested) and goes with
		// the first checkpoint at the latest: that checkpoint comes no
		// sooner than heldFirstCheckpoint (and at most twice that), so
		// that a short task's whole brief is one write instead of the
		// skeleton at a first checkpoint and the rest at its end. The
		// workflow hears of the attempt a few seconds later than it
		// would while karvi is not congested.
		d.req.CheckpointEvery = max(d.req.CheckpointEvery, heldFirstCheckpoint)
		d.heldStart = true
	}
	if err := d.run(ctx); err != nil {
		return StartAttemptResult{}, err
	}
	if err := d.finish(ctx); err != nil {
		return StartAttemptResult{}, err
	}
	d.res.Brief = d.brief
	d.res.Job = d.checkpointTally(ctx)
	res.Delivery = &d.res
	return res, nil
}

// notRunWhy words the board's answer to the attempt's first status write
// when it means the task must not run: a person cancelled it there, or it
// was deleted. "" for any other answer.
func notRunWhy(err error) string {
	switch {
	case errors.Is(err, sink.ErrBoardCancelled):
		return "the task was cancelled on the board before it started"
	case errors.Is(err, sink.ErrTaskGone):
		return "the task no longer exists in karvi (deleted before it started)"
	}
	return ""
}

// notRun ends a start that met the board's cancel (or the task's deletion)
// at its first status write, before the conductor is spawned: nothing is
// written over the board's word, no conductor runs, and the attempt is
// reported not run, for the workflow to end cleanly. Failing instead would
// fail the workflow for a person's ordinary action. A conductor of this
// attempt an earlier try spawned (it wrote nothing yet, or the status
// would not have been sent) is stopped, so nothing is left running.
func (a *Activities) notRun(ctx context.Context, d *delivery, res StartAttemptResult, why string) (StartAttemptResult, error) {
	plan := res.Plan
	runs, err := a.LiveRuns(d.req.TaskID)
	if err != nil {
		activities.Logger(ctx).Warn("some run records of the task could not be read", "task", d.req.TaskID, "error", err)
	}
	for _, r := range runs {
		if r.Plan != plan.Summary.Name {
			continue
		}
		// No later start of this plan follows (the attempt ends here), so
		// stopping the group is enough: no `conduct abort` is needed.
		if err := a.StopRun(ctx, r, mapping.RuntimeStop{}); err != nil {
			return StartAttemptResult{}, err
		}
	}
	// A held skeleton goes now, as on any end of an attempt: karvi then
	// shows the brief the workflow keeps.
	if err := d.flush(ctx); err != nil {
		return StartAttemptResult{}, err
	}
	activities.Logger(ctx).Warn("attempt not run", "task", d.req.TaskID, "plan", plan.Summary.Name, "why", why)
	res.SinkProblem = d.res.SinkProblem
	res.NotRun = why
	res.StartError = why
	return res, nil
}

// conductorStarted reports whether the attempt's conductor wrote an event.
func conductorStarted(plan PlanInfo) bool {
	fi, err := os.Stat(plan.EventsPath)
	return err == nil && fi.Size() > 0
}
