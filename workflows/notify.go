package workflows

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
)

// The webhook hears, besides pauses (pause.go): a task that ends blocked
// and needs a person, a host the fleet gave up on, and a run's end with
// its counts. Each goes through the same local activity as a pause, which
// only queues the event (the worker's notifier delivers it, retries it and
// keeps what it cannot deliver), so nothing waits on the receiver. The
// delivery id is made of the workflow's own identity and the attempt (or
// the run's execution), the same on every retry and replay, so a receiver
// that keeps ids acts on each event once; a replay does not send at all,
// since the local activity's result is in the history.

// versionNotifyEnds names the change that sends the blocked, host_lost and
// run_ended notifications. Histories recorded before it replay without
// them.
const versionNotifyEnds = "notify-ends"

// notifyOn reports whether this workflow sends the notifications of
// versionNotifyEnds. It is asked only where one is about to be sent, so
// a workflow that never sends one records no marker.
func notifyOn(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionNotifyEnds, workflow.DefaultVersion, 1) >= 1
}

// queueNotification hands one event to the worker's webhook notifier.
func queueNotification(ctx workflow.Context, req activities.NotifyRequest) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		Summary: req.Kind + " notification", StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{"BadNotification"}},
	})
	if err := workflow.ExecuteLocalActivity(lctx, acts.Notify, req).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("notification not queued", "kind", req.Kind, "error", err)
	}
}

// notifyBlocked tells that the task ended blocked and needs a person. A
// task of a run is the run's to report (its tasks loop, and the run's end
// says which failed); an abort is a person's own doing.
func (r *taskRun) notifyBlocked(o mapping.Outcome) {
	if o.TaskStatus != mapping.TaskBlocked || o.LastError == mapping.MsgUserAbort ||
		workflow.GetInfo(r.ctx).ParentWorkflowExecution != nil || !notifyOn(r.ctx) {
		return
	}
	a := &r.st.Current
	queueNotification(r.ctx, activities.NotifyRequest{
		ID:   fmt.Sprintf("%s-blocked-%d", workflow.GetInfo(r.ctx).WorkflowExecution.ID, a.N),
		Kind: "blocked", Time: workflow.Now(r.ctx).UTC(), TaskID: r.st.Dispatch.TaskID,
		Reason: firstNonBlank(o.BlockerReason, o.LastError, "task ended blocked"),
		Details: map[string]string{"plan": a.PlanName(), "phase": o.PhaseID,
			"attempt": strconv.Itoa(a.N), "error_type": o.ErrorType},
	})
}

// notifyHostLost tells that the attempt's host stopped answering and the
// task starts anew elsewhere.
func (r *taskRun) notifyHostLost(host, reason string) {
	if !notifyOn(r.ctx) {
		return
	}
	a := &r.st.Current
	queueNotification(r.ctx, activities.NotifyRequest{
		ID:   fmt.Sprintf("%s-host_lost-%d", workflow.GetInfo(r.ctx).WorkflowExecution.ID, a.N),
		Kind: "host_lost", Time: workflow.Now(r.ctx).UTC(), TaskID: r.st.Dispatch.TaskID,
		Host: host, Reason: reason,
		Details: map[string]string{"plan": a.PlanName(), "attempt": strconv.Itoa(a.N),
			"grace": r.st.Tuning.HostGraceOrDefault().String()},
	})
}

// notifyEnded tells that the run ended, with its tasks counted by state
// and those that need a person named.
func (r *runFlow) notifyEnded() {
	if !notifyOn(r.ctx) {
		return
	}
	doc := &r.st.Doc
	counts := map[runstatus.TaskState]int{}
	var states []runstatus.TaskState // in the order first seen
	var failed []string
	for _, rt := range r.run.Tasks {
		s := doc.Tasks[rt.ID].Status
		if counts[s] == 0 {
			states = append(states, s)
		}
		counts[s]++
		if needsPerson(s) {
			failed = append(failed, rt.ID)
		}
	}
	details := map[string]string{"status": string(doc.Status), "tasks": strconv.Itoa(len(r.run.Tasks))}
	var parts []string
	for _, s := range states {
		details[string(s)] = strconv.Itoa(counts[s])
		parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
	}
	sort.Strings(parts)
	if len(failed) > 0 {
		details["need_a_person"] = strings.Join(clipList(failed, 20), ", ")
	}
	if r.st.AbortReason != "" {
		details["abort_reason"] = r.st.AbortReason
	}
	info := workflow.GetInfo(r.ctx)
	queueNotification(r.ctx, activities.NotifyRequest{
		ID:   fmt.Sprintf("%s-run_ended-%s", info.WorkflowExecution.ID, info.WorkflowExecution.RunID),
		Kind: "run_ended", Time: workflow.Now(r.ctx).UTC(), RunID: r.run.Slug,
		Reason:  fmt.Sprintf("run %s ended %s: %s", r.run.Slug, doc.Status, strings.Join(parts, ", ")),
		Details: details,
	})
}

// clipList keeps at most n items, saying how many more there were.
func clipList(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(append([]string(nil), items[:n]...), fmt.Sprintf("%d more", len(items)-n))
}
