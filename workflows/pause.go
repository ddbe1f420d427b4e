package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows/runapi"
	"karvi-edda-temporal/workflows/taskapi"
)

// A usage limit is a pause, not a failure. The delivering tail follows the
// agents' transcripts, stops the conductor with SIGINT the moment one shows
// a limit (activities/limits.go) and reports it at its checkpoint. The task
// then waits on a durable timer until the limit's reset plus a margin (or
// a resume signal) and continues the SAME plan: the phases that failed on
// the limit are reset with `conduct retry`, the ones that passed are not
// run again, and neither an attempt nor a loop is counted. A task that
// pauses more often than Tuning.MaxPauses ends blocked.

// versionUsageLimits is the version of the deliver-in-tail change (task.go)
// from which deliveries follow the transcripts and a usage limit pauses.
const versionUsageLimits = 3

// pauseOnLimit stops what is left of the conductor, delivers its log to
// the end, and pauses the task until the limit's reset.
func (r *taskRun) pauseOnLimit(res activities.DeliverResult) error {
	a := &r.st.Current
	lim := *res.Limit
	if !res.Exited && a.Conductor != nil {
		stop := fmt.Sprintf("interrupt conductor %s (usage limit)", a.PlanName())
		err := workflow.ExecuteActivity(r.onHost(abortOptions(r.ctx, stop)), acts.InterruptConductor,
			activities.InterruptRequest{Plan: *a.Plan, Handle: *a.Conductor}).Get(r.ctx, nil)
		if isHostLost(err) {
			r.loseHost()
			return nil
		}
		if err != nil {
			return fmt.Errorf("interrupt conductor of %s: %w", a.PlanName(), err)
		}
		// Its log to the end: the interrupted phase's failure and whatever
		// came before it.
		for range maxDrains {
			var dr activities.DeliverResult
			req := r.deliverRequest(0)
			err := workflow.ExecuteActivity(r.onHost(deliverOptions(r.ctx, 0, tailSummary("drain", a))), acts.DeliverEvents, req).Get(r.ctx, &dr)
			if isHostLost(err) {
				r.loseHost()
				return nil
			}
			if err != nil {
				return fmt.Errorf("drain events of %s: %w", a.PlanName(), err)
			}
			r.streamStored(req.Stream)
			r.checkpoint(dr)
			if dr.Exited {
				break
			}
		}
	}
	// Whatever the conductor made of the limited attempt (blocked after
	// spending its attempts, or even a phase passed with no work done) is
	// not the attempt's outcome.
	a.Outcome, a.Conductor, a.Drained, a.FinalState, a.Stopped = nil, nil, false, nil, false
	r.st.Pauses++
	now := workflow.Now(r.ctx)
	if r.st.Pauses > r.st.Tuning.MaxPausesOrDefault() {
		o := mapping.UnfinishedOutcome(lim.Phase, 0, "")
		msg := fmt.Sprintf("Phase %s stopped on a usage limit %d times; giving up (%s)", lim.Phase, r.st.Pauses, lim.Text)
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
	r.st.Pause = &taskapi.Pause{
		Reason: taskapi.PausedUsageLimit, Phase: lim.Phase, Since: now, Until: until,
		ResetAt: lim.ResetAt, Source: lim.Source, Text: lim.Text, Count: r.st.Pauses,
	}
	// A resume signal sent before this pause does not end it.
	resumeCh := workflow.GetSignalChannel(r.ctx, SignalResume)
	var stale ResumeSignal
	for resumeCh.ReceiveAsync(&stale) {
	}
	r.log.Warn("usage limit: task paused", "phase", lim.Phase, "source", lim.Source,
		"resetAt", lim.ResetAt, "until", until)
	r.step(canonical.Step{Kind: canonical.StepPhasePaused, Phase: lim.Phase})
	r.step(canonical.Step{Kind: canonical.StepNote, Status: "paused",
		Reason: fmt.Sprintf("usage limit in phase %s (%s), resumes at %s", lim.Phase, lim.Source, until.UTC().Format(time.RFC3339))})
	r.notify("paused", fmt.Sprintf("usage limit in phase %s", lim.Phase), lim.ResetAt,
		map[string]string{"source": lim.Source, "phase": lim.Phase, "text": lim.Text, "until": until.UTC().Format(time.RFC3339)})
	r.tellRun(true, now)
	r.briefNote("paused", fmt.Sprintf("usage limit in phase %s, resumes at %s", lim.Phase, until.UTC().Format("15:04:05 UTC")))
	a.Stage = StagePaused
	r.upsertSearch()
	r.showDetails()
	return nil
}

// maxDrains bounds the deliveries that read a stopped conductor's log to
// its end (each carries at most a bounded number of bytes).
const maxDrains = 20

// paused waits for the pause to end: its timer, a resume signal, or an
// abort or redispatch, which the loop then acts on.
func (r *taskRun) paused() error {
	p := r.st.Pause
	if p == nil {
		// A state without its pause cannot wait for anything: continue.
		return r.resume("no pause recorded")
	}
	resumeCh := workflow.GetSignalChannel(r.ctx, SignalResume)
	tctx, cancel := workflow.WithCancel(r.ctx)
	defer cancel()
	reason := ""
	if wait := p.Until.Sub(workflow.Now(r.ctx)); wait > 0 {
		timer := workflow.NewTimer(tctx, wait)
		for reason == "" && !r.st.Signals.PendingAbort && !r.st.Signals.PendingRedispatch {
			sel := workflow.NewSelector(r.ctx)
			sel.AddFuture(timer, func(workflow.Future) { reason = "the limit's reset passed" })
			sel.AddReceive(resumeCh, func(c workflow.ReceiveChannel, _ bool) {
				var s ResumeSignal
				c.Receive(r.ctx, &s)
				reason = "resumed by signal"
				if s.Reason != "" {
					reason += ": " + s.Reason
				}
			})
			r.addSignalReceivers(sel)
			sel.Select(r.ctx)
		}
	} else {
		reason = "the limit's reset passed"
	}
	if reason == "" {
		// An abort or redispatch: the loop acts on it; there is no
		// conductor to stop.
		r.st.Pause = nil
		return nil
	}
	return r.resume(reason)
}

// resume continues the paused attempt's plan with a new conductor run.
func (r *taskRun) resume(why string) error {
	a := &r.st.Current
	r.st.Pause = nil
	a.Resumes++
	var res activities.ResumeResult
	summary := fmt.Sprintf("resume %s after a pause (%d)", a.PlanName(), a.Resumes)
	err := workflow.ExecuteActivity(r.onHost(startOptions(r.ctx, summary)), acts.ResumeConductor,
		activities.ResumeRequest{Plan: *a.Plan, Resume: a.Resumes}).Get(r.ctx, &res)
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
	a.Stage = StageRunning
	r.step(canonical.Step{Kind: canonical.StepNote, Status: "resumed", Reason: why})
	r.tellRun(false, workflow.Now(r.ctx))
	r.notify("resumed", why, time.Time{}, map[string]string{"plan": a.PlanName()})
	r.briefNote("resumed", why)
	r.upsertSearch()
	r.showDetails()
	return nil
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
// waits on the receiver. The delivery id is the workflow's and the pause's,
// the same on every retry.
func (r *taskRun) notify(kind, reason string, resetAt time.Time, details map[string]string) {
	id := fmt.Sprintf("%s-%s-%d", workflow.GetInfo(r.ctx).WorkflowExecution.ID, kind, r.st.Pauses)
	ctx := workflow.WithLocalActivityOptions(r.ctx, workflow.LocalActivityOptions{
		Summary: kind + " notification", StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{"BadNotification"}},
	})
	err := workflow.ExecuteLocalActivity(ctx, acts.Notify, activities.NotifyRequest{
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
	p := runapi.TaskPause{Task: r.st.Dispatch.TaskID, Attempt: r.st.Current.N, Paused: paused, At: at.UTC()}
	if paused {
		p.Reason = taskapi.PausedUsageLimit
	}
	if err := workflow.SignalExternalWorkflow(r.ctx, parent.ID, "", runapi.SignalTaskPause, p).Get(r.ctx, nil); err != nil {
		r.log.Warn("pause not reported to the run", "error", err)
	}
}
