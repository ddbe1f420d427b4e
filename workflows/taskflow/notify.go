package taskflow

import (
	"fmt"
	"strconv"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows/flowkit"
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

// deliveryID is the delivery id of the task's n-th event of its kind:
// the workflow id, the nonce of its chain (which continue-as-new keeps and
// no other workflow of the task has, identity.go), the kind and n.
func (r *taskRun) deliveryID(kind string, n int) string {
	info := workflow.GetInfo(r.ctx)
	if nonce := chainNonce(info); nonce != "" &&
		workflow.GetVersion(r.ctx, versionChainDeliveryIDs, workflow.DefaultVersion, 1) >= 1 {
		return fmt.Sprintf("%s-%s-%s-%d", info.WorkflowExecution.ID, nonce, kind, n)
	}
	return fmt.Sprintf("%s-%s-%d", info.WorkflowExecution.ID, kind, n)
}

// notifyBlocked tells that the task ended blocked and needs a person. A
// task of a run is the run's to report (its tasks loop, and the run's end
// says which failed); an abort is a person's own doing, and so is a task
// not run because the board cancelled or deleted it.
func (r *taskRun) notifyBlocked(o mapping.Outcome) {
	if o.TaskStatus != mapping.TaskBlocked || o.LastError == mapping.MsgUserAbort || mapping.IsNotRun(o.LastError) ||
		workflow.GetInfo(r.ctx).ParentWorkflowExecution != nil || !flowkit.NotifyOn(r.ctx) {
		return
	}
	a := &r.st.Current
	flowkit.QueueNotification(r.ctx, taskact.NotifyRequest{
		ID:   r.deliveryID("blocked", a.N),
		Kind: "blocked", Time: workflow.Now(r.ctx).UTC(), TaskID: r.st.Dispatch.TaskID,
		Reason: flowkit.FirstNonBlank(o.BlockerReason, o.LastError, "task ended blocked"),
		Details: map[string]string{"plan": a.PlanName(), "phase": o.PhaseID,
			"attempt": strconv.Itoa(a.N), "error_type": o.ErrorType},
	})
}

// notifyHostLost tells that the attempt's host stopped answering and the
// task starts anew elsewhere.
func (r *taskRun) notifyHostLost(host, reason string) {
	if !flowkit.NotifyOn(r.ctx) {
		return
	}
	a := &r.st.Current
	flowkit.QueueNotification(r.ctx, taskact.NotifyRequest{
		ID:   r.deliveryID("host_lost", a.N),
		Kind: "host_lost", Time: workflow.Now(r.ctx).UTC(), TaskID: r.st.Dispatch.TaskID,
		Host: host, Reason: reason,
		Details: map[string]string{"plan": a.PlanName(), "attempt": strconv.Itoa(a.N),
			"grace": r.st.Tuning.HostGraceOrDefault().String()},
	})
}
