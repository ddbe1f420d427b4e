package taskflow

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// An attempt as it runs today: one activity starts it, then the delivering
// tail carries every event's PATCH to the sink without waiting for the
// workflow, and reports back at checkpoints, where the workflow records the
// cursor and the brief. Between checkpoints the workflow's history does not
// grow: a 3-phase task costs a handful of activities, not one per event.

// startAttempt writes the plan, the skeleton and the dispatched status,
// starts the conductor and delivers its events up to a first checkpoint,
// in one activity. That first checkpoint comes soon (firstCheckpoint), so
// the workflow learns of the first phase promptly and a signal that came
// meanwhile waits at most that long.
func (r *taskRun) startAttempt() error {
	a := &r.st.Current
	if r.accountOn && !a.AccountChecked {
		// No attempt starts while its agent account is paused.
		return r.checkAccount()
	}
	if r.needsSlot() {
		// No conductor starts before the pool grants the attempt a slot.
		return r.acquireSlot()
	}
	if r.accountOn {
		if n := r.takeAccountNotice(); n != nil {
			// The account paused while the attempt waited for its slot.
			r.holdForAccount(*n)
			return nil
		}
	}
	var claimed *taskact.ClaimHostResult
	if r.claimsHost {
		// The claim comes first, before anything of the start is noted: a
		// task on its worker's account learns there whether that account
		// is paused, and is held before it starts.
		claim, err := r.claimHost(r.wantsWorkersAccount())
		if err != nil {
			return fmt.Errorf("start attempt %d: %w", a.N, err)
		}
		if r.adoptWorkersAccount(claim) {
			return nil
		}
		claimed = &claim
	}
	var res taskact.StartAttemptResult
	summary := fmt.Sprintf("start attempt %d of task %s", a.N, r.st.Dispatch.TaskID)
	r.stepAttemptStarted()
	wait := min(r.pollWait(), startWait)
	every := firstCheckpoint
	if c := r.st.Tuning.CheckpointEveryOrZero(); c > 0 && c < every {
		every = c
	}
	stream := r.streamFor()
	req := taskact.StartAttemptRequest{
		Dispatch: r.st.Dispatch, Attempt: a.N, Nonce: a.Nonce, Base: r.statusBase(), MaxWait: wait, CheckpointEvery: every,
		Stream: stream, WatchLimits: r.limitsOn, SpendEachPhase: r.checksSpend(),
	}
	if err := r.runStart(attemptOptions(r.ctx, wait, summary), req, &res, claimed); err != nil {
		return fmt.Errorf("start attempt %d: %w", a.N, err)
	}
	r.streamStored(stream)
	r.pinHost(res.Host)
	a.Plan = &res.Plan
	a.Brief = mapping.NewBriefState(r.st.Dispatch.TaskID, res.Plan.Summary)
	a.Cursor = taskact.TailCursor{}
	a.LastEventAt = workflow.Now(r.ctx)
	if res.SinkProblem != "" {
		r.st.SinkProblem = res.SinkProblem
	}
	if res.Delivery == nil && res.SinkProblem == "" {
		r.st.Counts.PatchesSent++ // the skeleton, from a worker that did not deliver
	}
	if res.NotRun != "" && r.knowsNotRun() {
		// The board cancelled (or deleted) the task before the attempt's
		// first status write: nothing runs, and the attempt ends as an
		// abort does, its final status write skipped, the cancel standing.
		r.decide(mapping.NotRunOutcome(res.NotRun))
		r.upsertSearch()
		return nil
	}
	r.st.TaskStatus = mapping.TaskDispatched
	if res.Conductor == nil {
		r.decide(mapping.CrashOutcome(r.currentPhase(), -1, "conductor could not start: "+res.StartError))
		r.upsertSearch()
		return nil
	}
	a.Conductor = res.Conductor
	a.Stage = taskapi.StageRunning
	if res.Delivery == nil {
		r.upsertSearch()
		return nil
	}
	r.st.Polls++
	r.checkpoint(*res.Delivery)
	// Signals that came while the attempt started were not listened for:
	// they decide first, as they would have had they come a moment later.
	r.drainSignals()
	if r.st.Signals.PendingAbort || r.st.Signals.PendingRedispatch {
		return nil
	}
	return r.afterCheckpoint(*res.Delivery)
}

// knowsNotRun reports whether this workflow ends a not-run attempt as
// such; asked only when a start says so, so no other history records it.
func (r *taskRun) knowsNotRun() bool {
	return workflow.GetVersion(r.ctx, versionNotRun, workflow.DefaultVersion, 1) >= 1
}

// firstCheckpoint bounds an attempt's first delivery once it delivered
// something; startWait bounds it while the conductor is silent, since it
// heartbeats at the start's rate (startHeartbeat).
const (
	firstCheckpoint = time.Second
	startWait       = 30 * time.Second
)

// tailHeartbeat is the heartbeat timeout of the next delivery: what the
// tail last reported of its worker, or the start's until it did.
func (r *taskRun) tailHeartbeat() time.Duration {
	if r.st.TailHeartbeat > 0 {
		return r.st.TailHeartbeat
	}
	return startHeartbeat
}

// deliver runs the delivering tail until its next checkpoint. A signal
// does not cancel it: the conductor is stopped instead, and the tail, which
// sees it gone, reads the log to its end and returns. So one delivery at a
// time ever writes to the sink, and nothing is left undelivered.
func (r *taskRun) deliver() error {
	a := &r.st.Current
	wait := r.pollWait()
	req := r.deliverRequest(wait)
	fut := workflow.ExecuteActivity(r.onHost(deliverOptions(r.ctx, wait, r.tailHeartbeat(), tailSummary("deliver", a))), acts.DeliverEvents, req)
	signalled := false
	// account: another task on the agent account met a usage limit.
	var account *accountapi.Notice
	if r.accountOn {
		account = r.takeAccountNotice()
	}
	for !fut.IsReady() && !signalled && account == nil {
		sel := workflow.NewSelector(r.ctx)
		sel.AddFuture(fut, func(workflow.Future) {})
		r.addSignalReceivers(sel)
		if r.accountOn {
			sel.AddReceive(r.accountCh, func(c workflow.ReceiveChannel, _ bool) {
				var n accountapi.Notice
				c.Receive(r.ctx, &n)
				if !n.Resume && n.Until.After(workflow.Now(r.ctx)) {
					account = &n
				}
			})
		}
		sel.Select(r.ctx)
		signalled = r.st.Signals.PendingAbort || r.st.Signals.PendingRedispatch
	}
	if signalled && !fut.IsReady() {
		// A host lost meanwhile fails the delivery under way too.
		if err := r.abortConductor(); err != nil && !isHostLost(err) {
			return err
		}
	} else if account != nil && !fut.IsReady() {
		// SIGINT at once: the phase under way goes back to pending, the
		// delivery sees the conductor gone and reads its log to the end.
		stop := fmt.Sprintf("interrupt conductor %s (usage limit on account %s)", a.PlanName(), account.Account)
		err := workflow.ExecuteActivity(r.onHost(abortOptions(r.ctx, stop)), acts.InterruptConductor,
			taskact.InterruptRequest{Plan: *a.Plan, Handle: *a.Conductor}).Get(r.ctx, nil)
		if err != nil && !isHostLost(err) {
			return fmt.Errorf("interrupt conductor of %s: %w", a.PlanName(), err)
		}
	}
	var res taskact.DeliverResult
	if err := fut.Get(r.ctx, &res); err != nil {
		if isHostLost(err) {
			r.loseHost()
			return nil
		}
		return fmt.Errorf("deliver events of %s: %w", a.PlanName(), err)
	}
	r.st.Polls++
	r.streamStored(req.Stream)
	r.checkpoint(res)
	r.drainSignals()
	signalled = signalled || r.st.Signals.PendingAbort || r.st.Signals.PendingRedispatch
	if signalled {
		// actOnSignals decides, with everything delivered: an abort keeps
		// a completion that came first; a redispatch starts anew.
		return nil
	}
	if account != nil && res.Limit == nil && (a.Outcome == nil || a.Outcome.TaskStatus != mapping.TaskCompleted) {
		res.Limit = &taskact.UsageLimit{Phase: r.currentPhase(), ResetAt: account.ResetAt,
			Source: account.Source, Text: account.Text}
		return r.pauseOnLimit(res, account)
	}
	return r.afterCheckpoint(res)
}

// afterCheckpoint decides what a checkpoint means for the attempt: a
// terminal event or the conductor's exit ends it; a conductor silent past
// its plan's timeout is stopped.
func (r *taskRun) afterCheckpoint(res taskact.DeliverResult) error {
	a := &r.st.Current
	if r.limitsOn && res.Limit != nil {
		return r.pauseOnLimit(res, nil)
	}
	if ended, err := r.onStall(res); ended || err != nil {
		return err
	}
	if a.Outcome != nil {
		a.Stage = taskapi.StageFinish
		return nil
	}
	if res.Exited {
		r.decide(r.exitOutcome(res.Exit()))
		return nil
	}
	if ended, err := r.betweenDeliveries(); ended || err != nil {
		return err
	}
	return r.stopIfSilent()
}

// exitOutcome is how an attempt whose conductor exited without a terminal
// event ended. It once blamed a phase for an error edda had left on it from
// an earlier try (edda keeps a phase's error after the phase passed, and
// while its next try runs); histories recorded then replay with that
// outcome. The marker is only recorded where the two rules disagree, so
// other histories are unchanged.
func (r *taskRun) exitOutcome(x mapping.ConductorExit) mapping.Outcome {
	a := &r.st.Current
	o := mapping.ExitOutcome(x, a.Brief, a.Plan.Summary)
	if earlier := mapping.ExitOutcomeBlamingEarlierTries(x, a.Brief, a.Plan.Summary); earlier != o &&
		workflow.GetVersion(r.ctx, versionCurrentErrors, workflow.DefaultVersion, 1) < 1 {
		return earlier
	}
	return o
}

func (r *taskRun) deliverRequest(wait time.Duration) taskact.DeliverRequest {
	a := &r.st.Current
	return taskact.DeliverRequest{
		TaskID: r.st.Dispatch.TaskID, Plan: *a.Plan, Handle: *a.Conductor,
		Cursor: a.Cursor, Brief: a.Brief,
		TaskStatus: r.st.TaskStatus, Base: r.statusBase(),
		MaxWait: wait, CheckpointEvery: r.st.Tuning.CheckpointEveryOrZero(),
		Job:            a.Job,
		Stream:         r.streamFor(),
		SpendEachPhase: r.checksSpend(),
		LimitWatch:     taskact.LimitWatch{WatchLimits: r.limitsOn, Transcripts: a.Transcripts},
		StallWatch:     r.stallWatch(),
	}
}

// checkpoint records what a delivery did.
func (r *taskRun) checkpoint(res taskact.DeliverResult) {
	a := &r.st.Current
	a.Cursor = res.Next
	a.Brief = res.Brief
	if res.TailHeartbeat > 0 {
		r.st.TailHeartbeat = res.TailHeartbeat
	}
	a.Events += res.Events
	r.st.Counts.EventsApplied += res.Events
	r.st.Counts.PatchesSent += res.Patches + res.Resumed
	r.st.Counts.Malformed += res.Malformed
	if res.MalformedSample != "" {
		r.st.Counts.LastMalformed = res.MalformedSample
	}
	if res.SinkProblem != "" {
		r.st.SinkProblem = res.SinkProblem
	}
	if res.TaskStatus != "" {
		r.st.TaskStatus = res.TaskStatus
	}
	r.countStream(res.Stream)
	if res.Events > 0 {
		a.LastEventAt = workflow.Now(r.ctx)
	}
	if res.Outcome != nil && a.Outcome == nil {
		a.Outcome = res.Outcome
	}
	if res.Exited {
		a.Drained = true
		a.FinalState = res.State
	}
	if res.Job != nil {
		a.Job = res.Job
	}
	if res.WatchLimits {
		a.Transcripts = res.Transcripts
	}
	if res.WatchStalls {
		a.ProgressAt = res.ProgressAt
	}
	r.upsertSearch()
	r.showDetails()
}

// abortConductor stops the conductor's process group and marks its plan
// aborted.
func (r *taskRun) abortConductor() error {
	a := &r.st.Current
	stop := fmt.Sprintf("stop conductor %s (process group %d)", a.PlanName(), a.Conductor.PGID)
	stream := r.streamFor()
	err := workflow.ExecuteActivity(r.onHost(abortOptions(r.ctx, stop)), acts.AbortConductor,
		taskact.AbortRequest{Plan: *a.Plan, Handle: *a.Conductor, Stream: stream}).Get(r.ctx, nil)
	if err != nil {
		return fmt.Errorf("stop conductor of %s: %w", a.PlanName(), err)
	}
	r.streamStored(stream)
	a.Stopped = true
	return nil
}

// stopAndDrain is stopConductor for delivery in the tail: stop the
// conductor unless it was stopped already, deliver
// what it wrote up to its end, and
// return its own outcome when the plan completed before it could be
// stopped. Any other terminal event gives way to the decision at hand.
func (r *taskRun) stopAndDrain() (*mapping.Outcome, error) {
	a := &r.st.Current
	if a.Conductor != nil && a.Plan != nil && !a.Drained {
		if !a.Stopped {
			if err := r.abortConductor(); err != nil {
				if !isHostLost(err) {
					return nil, err
				}
				r.leaveHost()
			}
		}
		if a.Conductor != nil {
			var res taskact.DeliverResult
			req := r.deliverRequest(0)
			err := workflow.ExecuteActivity(r.onHost(deliverOptions(r.ctx, 0, startHeartbeat, tailSummary("drain", a))), acts.DeliverEvents, req).Get(r.ctx, &res)
			switch {
			case isHostLost(err):
				r.leaveHost()
			case err != nil:
				return nil, fmt.Errorf("drain events of %s: %w", a.PlanName(), err)
			default:
				r.streamStored(req.Stream)
				r.checkpoint(res)
			}
			a.Conductor = nil
		}
	}
	completed := a.Outcome
	a.Outcome = nil
	if completed != nil && completed.TaskStatus == mapping.TaskCompleted {
		return completed, nil
	}
	return nil, nil
}

// statusBase is what every status write of this task carries.
func (r *taskRun) statusBase() taskact.TaskStatusUpdate {
	return taskact.TaskStatusUpdate{
		PlanID:   r.st.Dispatch.PlanID,
		PlanName: r.st.Current.PlanName(),
		AskedAt:  workflow.Now(r.ctx).UTC().Format(time.RFC3339),
	}
}

// catchUp makes the attempt's brief what the sink holds of it, when its
// host was lost while a delivery there may have sent patches past the
// checkpoint: the settling patch carries the whole log, so starting from
// the checkpoint would take the sink's brief back and, when the attempt's
// end is final, lose those entries for good. The read runs on the shared
// queue; when it fails or the sink holds nothing later, the checkpoint
// settles as before.
func (r *taskRun) catchUp() {
	a := &r.st.Current
	if !a.SinkAhead || a.Plan == nil {
		return
	}
	a.SinkAhead = false
	if workflow.GetVersion(r.ctx, versionSettleCatchesUp, workflow.DefaultVersion, 1) < 1 {
		return
	}
	var res taskact.CatchUpResult
	err := workflow.ExecuteActivity(catchUpOptions(r.ctx, "read what the sink holds of "+a.PlanName()),
		acts.CatchUpBrief, taskact.CatchUpRequest{TaskID: r.st.Dispatch.TaskID, Brief: a.Brief}).Get(r.ctx, &res)
	if err != nil {
		r.log.Warn("the sink's brief could not be read; settling from the checkpoint", "error", err)
		return
	}
	if res.Brief != nil {
		a.Brief.Brief = *res.Brief
		r.showDetails()
	}
}

// catchUpOptions: a read of the sink, retried briefly; an attempt's end
// does not wait on a sink outage for it.
func catchUpOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        5 * time.Second,
			MaximumAttempts:        5,
			NonRetryableErrorTypes: []string{taskact.ErrSinkRejected, taskact.ErrNoBrief},
		},
	})
}
