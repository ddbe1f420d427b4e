package taskflow

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/metrics"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/stalls"
)

// A stall is a phase whose conductor writes no event and whose agent
// writes no transcript line for longer than the threshold (the dispatch's
// stallAfterSec, else the worker's -stall-after). The delivering tail
// watches for it (activities/taskact/stall.go) and returns when it begins; the
// workflow reports it (a brief note, a step in the canonical stream, a
// metric, a webhook notification of kind stalled, the run's status, the
// Web UI's details) and acts as the dispatch's onStall (else the worker's
// -on-stall) says: warn only, redispatch (attempt n+1, as the redispatch
// signal does) or abort. The stall ends, noted once, when progress
// resumes.

// stallWatch is the part of a delivery request that asks for the watch.
func (r *taskRun) stallWatch() taskact.StallWatch {
	a := &r.st.Current
	if !r.limitsOn {
		return taskact.StallWatch{} // the watch reads the transcripts through the limit watch
	}
	// A conductor (re)started counts as progress: LastEventAt is set then.
	progress := a.ProgressAt
	if a.LastEventAt.After(progress) {
		progress = a.LastEventAt
	}
	return taskact.StallWatch{WatchStalls: true, StallAfter: r.st.Dispatch.StallAfter(), OnStall: r.st.Dispatch.OnStall,
		ProgressAt: progress, Stalled: a.Stall != nil}
}

// onStall handles what a checkpoint says of stalls: the end of the one
// under way, or the beginning of one. ended: the attempt ended (its
// conductor was stopped).
func (r *taskRun) onStall(res taskact.DeliverResult) (ended bool, err error) {
	a := &r.st.Current
	if !res.WatchStalls {
		return false, nil
	}
	if a.Stall != nil && res.ProgressAt.After(a.Stall.Since) {
		r.stallEnded()
	}
	s := res.Stall
	if s == nil || a.Outcome != nil || res.Exited || a.Stall != nil {
		return false, nil
	}
	if workflow.GetVersion(r.ctx, versionStallWatch, workflow.DefaultVersion, 1) < 1 {
		return false, nil
	}
	return r.stalled(*s)
}

// stalled reports a stall that began and acts on it.
func (r *taskRun) stalled(s taskact.Stall) (bool, error) {
	a := &r.st.Current
	r.st.Stalls++
	action := s.Action
	if action == stalls.Redispatch && a.N >= r.st.Dispatch.EffectiveMaxAttempts() {
		// Attempts are bounded as a phase's are: a phase that stalls on
		// every attempt ends the task, as an abort.
		action = stalls.Abort
	}
	silent := formatDuration(s.SeenAt.Sub(s.Since))
	a.Stall = &taskapi.Stall{Phase: s.Phase, Since: s.Since, SeenAt: s.SeenAt, After: s.After, Action: string(action)}
	where := "phase " + s.Phase
	if s.Phase == "" {
		where = "the attempt (no phase yet)"
	}
	what := map[stalls.Action]string{
		stalls.Warn:       "warning only; it goes on",
		stalls.Redispatch: fmt.Sprintf("redispatching as attempt %d", a.N+1),
		stalls.Abort:      "aborting the task",
	}[action]
	reason := fmt.Sprintf("%s stalled: no event and no agent output for %s (threshold %s); %s", where, silent, formatDuration(s.After), what)
	r.log.Warn("phase stalled", "phase", s.Phase, "silent", silent, "action", action)
	metrics.Stalled(workflow.GetMetricsHandler(r.ctx), string(action))
	r.step(canonical.Step{Kind: canonical.StepNote, Status: "stalled", Phase: s.Phase, Reason: reason})
	r.briefNote("stalled", reason)
	r.notifyStall("stalled", reason, map[string]string{"phase": s.Phase, "since": s.Since.UTC().Format(time.RFC3339),
		"after": s.After.String(), "action": string(action), "attempt": fmt.Sprint(a.N)})
	r.tellRunStall(true, s.Phase, s.Since)
	r.showDetails()
	switch action {
	case stalls.Redispatch, stalls.Abort:
		completed, err := r.stopConductor()
		if err != nil {
			return true, err
		}
		a.Stall = nil
		r.tellRunStall(false, s.Phase, workflow.Now(r.ctx))
		if completed != nil {
			// The plan completed before it could be stopped: that stands.
			r.decide(*completed)
			return true, nil
		}
		if action == stalls.Abort {
			r.decide(mapping.StallAbortedOutcome(s.Phase, silent))
			return true, nil
		}
		r.stepAttemptEnded(taskapi.EndedRedispatched, reason)
		r.endAttempt(taskapi.EndedRedispatched, reason)
		r.nextAttempt()
		return true, nil
	}
	return false, nil
}

// stallEnded notes, once, that the stalled phase shows progress again.
func (r *taskRun) stallEnded() {
	a := &r.st.Current
	s := a.Stall
	a.Stall = nil
	if workflow.GetVersion(r.ctx, versionStallWatch, workflow.DefaultVersion, 1) < 1 {
		return
	}
	reason := fmt.Sprintf("phase %s shows progress again after %s", s.Phase, formatDuration(a.ProgressAt.Sub(s.Since)))
	if s.Phase == "" {
		reason = fmt.Sprintf("the attempt shows progress again after %s", formatDuration(a.ProgressAt.Sub(s.Since)))
	}
	r.log.Info("stall ended", "phase", s.Phase)
	r.step(canonical.Step{Kind: canonical.StepNote, Status: "stall_ended", Phase: s.Phase, Reason: reason})
	r.briefNote("stall_ended", reason)
	r.tellRunStall(false, s.Phase, a.ProgressAt)
	r.showDetails()
}

// notifyStall sends a stall's notification, in a local activity that only
// queues it, as notify does; its delivery id names the task's stall.
func (r *taskRun) notifyStall(kind, reason string, details map[string]string) {
	id := r.deliveryID(kind, r.st.Stalls)
	ctx := workflow.WithLocalActivityOptions(r.ctx, workflow.LocalActivityOptions{
		Summary: kind + " notification", StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{"BadNotification"}},
	})
	err := workflow.ExecuteLocalActivity(ctx, acts.Notify, taskact.NotifyRequest{
		ID: id, Kind: kind, Time: workflow.Now(r.ctx).UTC(), TaskID: r.st.Dispatch.TaskID,
		Reason: reason, Details: details,
	}).Get(r.ctx, nil)
	if err != nil {
		r.log.Warn("notification not queued", "kind", kind, "error", err)
	}
}

// tellRunStall tells the run that started the task, if any, that a phase
// stalled or shows progress again, so the run's status warns of it.
func (r *taskRun) tellRunStall(stalled bool, phase string, at time.Time) {
	parent := workflow.GetInfo(r.ctx).ParentWorkflowExecution
	if parent == nil {
		return
	}
	s := taskapi.TaskStall{Task: r.st.Dispatch.TaskID, Attempt: r.st.Current.N, Stalled: stalled, Phase: phase, At: at.UTC()}
	if err := workflow.SignalExternalWorkflow(r.ctx, parent.ID, "", taskapi.SignalTaskStall, s).Get(r.ctx, nil); err != nil {
		r.log.Warn("stall not reported to the run", "error", err)
	}
}

// stallWords is the Web UI's line for a stall under way.
func stallWords(s *taskapi.Stall) string {
	where := "phase " + s.Phase
	if s.Phase == "" {
		where = "the attempt"
	}
	return fmt.Sprintf("**stalled**: %s shows no event and no agent output since %s UTC (threshold %s; on stall: %s)",
		where, s.Since.UTC().Format("2006-01-02 15:04:05"), formatDuration(s.After), s.Action)
}
