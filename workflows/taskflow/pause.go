package taskflow

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/mapping"
)

// A usage limit is a pause, not a failure. The delivering tail follows the
// agents' transcripts, stops the conductor with SIGINT the moment one shows
// a limit (activities/taskact/limits.go) and reports it at its checkpoint. The task
// then waits on a durable timer until the limit's reset plus a margin (or
// a resume signal) and continues the SAME plan: the phases that failed on
// the limit are reset with `conduct retry`, the ones that passed are not
// run again, and neither an attempt nor a loop is counted. A task that
// pauses more often than Tuning.MaxPauses ends blocked.

// pauseOnLimit stops what is left of the conductor, delivers its log to
// the end, and pauses the task until the limit's reset. from is the
// account's notice when another task on the same account met the limit
// (pause_account.go); nil when this task's agent met it.
func (r *taskRun) pauseOnLimit(res taskact.DeliverResult, from *accountapi.Notice) error {
	a := &r.st.Current
	lim := *res.Limit
	if !res.Exited {
		if lost, err := r.interruptAndDrain("usage limit"); lost || err != nil {
			return err
		}
	}
	// Whatever the conductor made of the limited attempt (blocked after
	// spending its attempts, or even a phase passed with no work done) is
	// not the attempt's outcome.
	a.Outcome, a.Conductor, a.Drained, a.FinalState, a.Stopped = nil, nil, false, nil, false
	r.st.Pauses++
	if from == nil {
		r.st.OwnLimits++
	}
	now := workflow.Now(r.ctx)
	if msg := r.pauseCapMessage(lim, from == nil); msg != "" {
		o := mapping.UnfinishedOutcome(lim.Phase, 0, "")
		o.LastError, o.BlockerReason = msg, msg
		r.decide(o)
		return nil
	}
	until := now.Add(r.st.Tuning.PauseWaitOrDefault())
	if !lim.ResetAt.IsZero() {
		until = lim.ResetAt.Add(r.st.Tuning.PauseMarginOrDefault())
		if until.Before(now) {
			until = now
		}
	}
	p := &taskapi.Pause{
		Reason: taskapi.PausedUsageLimit, Phase: lim.Phase, Since: now, Until: until,
		ResetAt: lim.ResetAt, Source: lim.Source, Text: lim.Text, Count: r.st.Pauses,
	}
	if from != nil {
		p.Until, p.Account, p.By = from.Until, r.accountKey(), from.By
	}
	r.enterPause(p)
	if from == nil {
		r.reportLimit(p)
	}
	return nil
}

// pauseCapMessage is the blocker of a task past its pause cap, "" while
// it may pause. own: this pause is the task's own usage limit.
func (r *taskRun) pauseCapMessage(lim taskact.UsageLimit, own bool) string {
	limit := r.st.Tuning.MaxPausesOrDefault()
	text := ""
	if lim.Text != "" {
		text = " (" + lim.Text + ")"
	}
	if workflow.GetVersion(r.ctx, versionOwnLimitCap, workflow.DefaultVersion, 1) < 1 {
		if r.st.Pauses <= limit {
			return ""
		}
		return fmt.Sprintf("Phase %s stopped on a usage limit %d times; giving up (%s)", lim.Phase, r.st.Pauses, lim.Text)
	}
	if !own || r.st.OwnLimits <= limit {
		return ""
	}
	return fmt.Sprintf("Phase %s stopped on its own usage limit %d times; giving up%s", lim.Phase, r.st.OwnLimits, text)
}

// interruptAndDrain stops the conductor with SIGINT, its graceful stop,
// and delivers its log to the end. lost: the host was lost meanwhile (the
// attempt is given up).
func (r *taskRun) interruptAndDrain(why string) (lost bool, err error) {
	a := &r.st.Current
	if a.Conductor == nil {
		return false, nil
	}
	stop := fmt.Sprintf("interrupt conductor %s (%s)", a.PlanName(), why)
	err = workflow.ExecuteActivity(r.onHost(abortOptions(r.ctx, stop)), acts.InterruptConductor,
		taskact.InterruptRequest{Plan: *a.Plan, Handle: *a.Conductor}).Get(r.ctx, nil)
	if isHostLost(err) {
		r.loseHost()
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("interrupt conductor of %s: %w", a.PlanName(), err)
	}
	// Its log to the end: the interrupted phase's failure and whatever
	// came before it.
	for range maxDrains {
		var dr taskact.DeliverResult
		req := r.deliverRequest(0)
		err := workflow.ExecuteActivity(r.onHost(deliverOptions(r.ctx, 0, startHeartbeat, tailSummary("drain", a))), acts.DeliverEvents, req).Get(r.ctx, &dr)
		if isHostLost(err) {
			r.loseHost()
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("drain events of %s: %w", a.PlanName(), err)
		}
		r.streamStored(req.Stream)
		r.checkpoint(dr)
		if dr.Exited {
			break
		}
	}
	return false, nil
}

// enterPause records the pause and tells everyone who watches: the log,
// the canonical stream, the webhook, the run, the brief. A paused attempt
// gives its agent slot back.
func (r *taskRun) enterPause(p *taskapi.Pause) {
	a := &r.st.Current
	r.st.Pause = p
	// Paused from here on: a status query never shows the pause with the
	// attempt still running.
	a.Stage = taskapi.StagePaused
	// A resume signal sent before this pause does not end it.
	resumeCh := workflow.GetSignalChannel(r.ctx, taskapi.SignalResume)
	var stale taskapi.ResumeSignal
	for resumeCh.ReceiveAsync(&stale) {
	}
	until := p.Until.UTC()
	what := fmt.Sprintf("usage limit in phase %s%s", p.Phase, accountWords(p))
	when := "resumes at " + until.Format("15:04:05 UTC")
	if p.Reason == taskapi.PausedBudget {
		what, when = p.Budget, "until the budget is raised or the task resumed"
	}
	r.log.Warn("task paused", "reason", p.Reason, "phase", p.Phase, "source", p.Source,
		"resetAt", p.ResetAt, "until", until, "account", p.Account, "by", p.By)
	if p.Phase != "" {
		r.step(canonical.Step{Kind: canonical.StepPhasePaused, Phase: p.Phase})
	}
	if p.Reason == taskapi.PausedBudget {
		r.step(canonical.Step{Kind: canonical.StepNote, Status: "paused", Reason: what + ", " + when})
	} else {
		r.step(canonical.Step{Kind: canonical.StepNote, Status: "paused",
			Reason: fmt.Sprintf("usage limit in phase %s (%s)%s, resumes at %s", p.Phase, p.Source, accountWords(p), until.Format(time.RFC3339))})
	}
	details := map[string]string{"source": p.Source, "phase": p.Phase, "text": p.Text}
	if !p.Until.IsZero() {
		details["until"] = until.Format(time.RFC3339)
	}
	if p.Account != "" {
		details["account"], details["by"] = p.Account, p.By
	}
	r.notify("paused", what, p.ResetAt, details)
	r.tellRun(true, p.Since)
	r.briefNote("paused", what+", "+when)
	r.pauseStatus(mapping.DispatchPaused, "paused: "+what+", "+when)
	r.giveSlotBack()
	r.upsertSearch()
	r.showDetails()
}

// maxDrains bounds the deliveries that read a stopped conductor's log to
// its end (each carries at most a bounded number of bytes).
const maxDrains = 20

// paused waits for the pause to end: its timer, a resume signal, the
// account's resume, or an abort or redispatch, which the loop then acts
// on. An account's later pause extends the wait. A pause without an end
// (a budget's) waits for a resume or a raised budget, whatever its
// account says (budget.go). Once it ends, an attempt that gave its slot
// back takes one again before it resumes.
func (r *taskRun) paused() error {
	p := r.st.Pause
	if p == nil {
		// A state without its pause cannot wait for anything: continue.
		return r.resume("no pause recorded")
	}
	if p.Ended != "" {
		return r.resumeWithSlot(p.Ended)
	}
	resumeCh := workflow.GetSignalChannel(r.ctx, taskapi.SignalResume)
	reason := r.budgetRaised()
	byPerson := false
	for reason == "" && !r.st.Signals.PendingAbort && !r.st.Signals.PendingRedispatch {
		var timer workflow.Future
		if !p.Until.IsZero() {
			wait := p.Until.Sub(workflow.Now(r.ctx))
			if wait <= 0 {
				reason = "the limit's reset passed"
				break
			}
			tctx, cancel := workflow.WithCancel(r.ctx)
			defer cancel()
			timer = workflow.NewTimer(tctx, wait)
		}
		extended := false
		for !extended && reason == "" && !r.st.Signals.PendingAbort && !r.st.Signals.PendingRedispatch {
			sel := workflow.NewSelector(r.ctx)
			if timer != nil {
				sel.AddFuture(timer, func(workflow.Future) { reason = "the limit's reset passed" })
			}
			sel.AddReceive(resumeCh, func(c workflow.ReceiveChannel, _ bool) {
				var s taskapi.ResumeSignal
				c.Receive(r.ctx, &s)
				reason, byPerson = "resumed by signal", true
				if s.Reason != "" {
					reason += ": " + s.Reason
				}
			})
			r.addSignalReceivers(sel)
			if r.accountOn {
				sel.AddReceive(r.accountCh, func(c workflow.ReceiveChannel, _ bool) {
					var n accountapi.Notice
					c.Receive(r.ctx, &n)
					if p.Reason == taskapi.PausedBudget && r.budgetPauseOwnsItsEnd() {
						r.rememberAccountPause(n)
						return
					}
					switch {
					case n.Resume:
						reason = "account " + n.Account + " resumed"
						if n.Reason != "" {
							reason += ": " + n.Reason
						}
					case p.Until.IsZero() || n.Until.After(p.Until):
						p.Until = n.Until
						extended = true
						r.log.Info("account pause extends the task's", "account", n.Account, "until", n.Until)
						r.showDetails()
					}
				})
			}
			r.addBudgetReceivers(sel, &reason)
			sel.Select(r.ctx)
		}
	}
	if reason == "" {
		// An abort or redispatch: the loop acts on it; there is no
		// conductor to stop.
		r.st.Pause, r.st.AccountPause = nil, nil
		return nil
	}
	if p.Reason == taskapi.PausedBudget {
		if held := r.endBudgetPause(reason, byPerson); held {
			return nil
		}
	}
	return r.resumeWithSlot(reason)
}

// resumeWithSlot resumes, once the attempt holds an agent slot again if
// it gave its own back: a wait in line keeps the pause (ended) until the
// pool grants the slot.
func (r *taskRun) resumeWithSlot(why string) error {
	if r.accountOn && r.st.Current.Plan != nil && r.needsSlot() {
		r.st.Pause.Ended = why
		if err := r.acquireSlot(); err != nil {
			return err
		}
		if r.needsSlot() || r.st.Current.Outcome != nil {
			r.st.Pause = nil
			return nil // a signal came, or the pool refused: the loop acts on it
		}
	}
	return r.resume(why)
}

// resume continues the paused attempt's plan with a new conductor run; an
// attempt held before it started goes on to start.
func (r *taskRun) resume(why string) error {
	a := &r.st.Current
	r.st.Pause = nil
	if r.accountOn && a.Plan == nil {
		a.Stage = taskapi.StagePrepare
		r.step(canonical.Step{Kind: canonical.StepNote, Status: "resumed", Reason: why})
		r.tellRun(false, workflow.Now(r.ctx))
		r.notify("resumed", why, time.Time{}, nil)
		r.upsertSearch()
		r.showDetails()
		return nil
	}
	a.Resumes++
	var res taskact.ResumeResult
	summary := fmt.Sprintf("resume %s after a pause (%d)", a.PlanName(), a.Resumes)
	err := workflow.ExecuteActivity(r.onHost(startOptions(r.ctx, summary)), acts.ResumeConductor,
		taskact.ResumeRequest{Plan: *a.Plan, Resume: a.Resumes}).Get(r.ctx, &res)
	if isHostLost(err) {
		r.loseHost()
		return nil
	}
	if err != nil {
		return fmt.Errorf("resume %s: %w", a.PlanName(), err)
	}
	if res.Conductor == nil {
		r.decide(mapping.CrashOutcome(r.currentPhase(), -1, "conductor could not resume: "+res.StartError))
		return nil
	}
	r.log.Info("task resumed", "plan", a.PlanName(), "why", why, "retried", res.Retried)
	a.Conductor = res.Conductor
	a.LastEventAt = workflow.Now(r.ctx)
	a.Stage = taskapi.StageRunning
	r.step(canonical.Step{Kind: canonical.StepNote, Status: "resumed", Reason: why})
	r.tellRun(false, workflow.Now(r.ctx))
	r.notify("resumed", why, time.Time{}, map[string]string{"plan": a.PlanName()})
	r.briefNote("resumed", why)
	r.pauseStatus(mapping.DispatchDispatching, "resumed: "+why)
	r.upsertSearch()
	r.showDetails()
	return nil
}

// pauseStatus tells karvi the task paused or resumed: the status stays
// what it is (in progress: a pause is no failure), the task's result says
// why and until when. A refusal is logged: the pause goes on.
func (r *taskRun) pauseStatus(state mapping.DispatchState, summary string) {
	if r.st.TaskStatus == "" || workflow.GetVersion(r.ctx, versionPauseStatus, workflow.DefaultVersion, 1) < 1 {
		return
	}
	u := taskact.TaskStatusUpdate{Status: r.st.TaskStatus, DispatchState: state, Reason: summary}
	if err := r.setStatus(u); err != nil {
		r.log.Warn("pause not shown in the sink", "error", err)
	}
}

// briefNote adds a line of the runtime's own to the brief's log.
func (r *taskRun) briefNote(action, detail string) {
	a := &r.st.Current
	if len(a.Brief.PhaseOrder) == 0 {
		return
	}
	c := a.Brief.Note(workflow.Now(r.ctx).UTC().Format(time.RFC3339), action, detail)
	r.sendPatches([]mapping.Patch{r.enc.Patch(&a.Brief, c)})
}

// notify tells the person watching the tasks, through the worker's
// webhook, in a local activity that only queues the event: the task never
// waits on the receiver. The delivery id is the workflow chain's and the
// pause's, the same on every retry (deliveryID).
func (r *taskRun) notify(kind, reason string, resetAt time.Time, details map[string]string) {
	id := r.deliveryID(kind, r.st.Pauses)
	ctx := workflow.WithLocalActivityOptions(r.ctx, workflow.LocalActivityOptions{
		Summary: kind + " notification", StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{"BadNotification"}},
	})
	err := workflow.ExecuteLocalActivity(ctx, acts.Notify, taskact.NotifyRequest{
		ID: id, Kind: kind, Time: workflow.Now(r.ctx).UTC(), TaskID: r.st.Dispatch.TaskID,
		Reason: reason, ResetAt: resetAt, Details: details,
	}).Get(r.ctx, nil)
	if err != nil {
		r.log.Warn("notification not queued", "kind", kind, "error", err)
	}
}

// tellRun tells the run that started the task, if any, that it paused or
// runs again, so the run's status shows it.
func (r *taskRun) tellRun(paused bool, at time.Time) {
	parent := workflow.GetInfo(r.ctx).ParentWorkflowExecution
	if parent == nil {
		return
	}
	p := taskapi.TaskPause{Task: r.st.Dispatch.TaskID, Attempt: r.st.Current.N, Paused: paused, At: at.UTC()}
	if paused {
		p.Reason = taskapi.PausedUsageLimit
		if r.st.Pause != nil && r.st.Pause.Reason != "" {
			p.Reason = r.st.Pause.Reason
		}
	}
	if err := workflow.SignalExternalWorkflow(r.ctx, parent.ID, "", taskapi.SignalTaskPause, p).Get(r.ctx, nil); err != nil {
		r.log.Warn("pause not reported to the run", "error", err)
	}
}
