package taskact

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/mapping"
)

// PatchRequest sends brief patches, in order, for one task.
type PatchRequest struct {
	TaskID  string          `json:"taskId"`
	Patches []mapping.Patch `json:"patches"`
}

// PatchBrief sends the patches in order. A retried batch resumes after the
// patches already delivered (see patchProgress), so karvi sees each patch
// once and in order unless the worker crashed mid-batch; even then each
// patch is idempotent under karvi's merge (the log travels whole), so the
// brief converges.
func (a *Activities) PatchBrief(ctx context.Context, req PatchRequest) error {
	return a.sendPatches(ctx, req)
}

// SetTaskStatus writes the task status; the sink walks karvi's legal
// transitions and is a no-op when the task already has the status.
func (a *Activities) SetTaskStatus(ctx context.Context, req StatusRequest) error {
	if _, err := a.appendSteps(ctx, req.Stream); err != nil {
		return fmt.Errorf("store the workflow's events: %w", err)
	}
	a.traceSteps(ctx, req.Stream, req.TaskID, req.Update.PlanID)
	a.leaveAccount(ctx, req.LeaveAccount)
	err := a.Sink.SetStatus(ctx, req.TaskID, req.Update.sink())
	if errors.Is(err, sink.ErrBoardCancelled) || errors.Is(err, sink.ErrTaskGone) {
		// Nothing to write: a person cancelled the task on the board (that
		// stands), or karvi deleted it. The attempt ends as it ended; the
		// workflow keeps the outcome and the brief.
		if activity.IsActivity(ctx) {
			activity.GetLogger(ctx).Warn("task status not written", "task", req.TaskID,
				"status", req.Update.Status, "why", err.Error())
		}
		return nil
	}
	if err != nil {
		return sinkError(fmt.Sprintf("set task %s status %s", req.TaskID, req.Update.Status), err)
	}
	return nil
}

// leaveAccount ends the task's membership of account, when the request
// asks (StatusRequest.LeaveAccount). Best effort: a failure is logged, and
// the account drops a member whose workflow is gone when it next signals.
func (a *Activities) leaveAccount(ctx context.Context, account string) {
	if account == "" || a.Accounts == nil || a.Accounts.Client == nil || !activity.IsActivity(ctx) {
		return
	}
	member := activity.GetInfo(ctx).WorkflowExecution.ID
	if err := a.Accounts.Leave(ctx, account, member); err != nil {
		activity.GetLogger(ctx).Warn("task not taken off its account; the account drops it when it next signals",
			"account", account, "error", err)
	}
}

// sinkError marks what no retry can fix as non-retryable, with karvi's own
// message; everything else (refused connections, 5xx) stays retryable.
func sinkError(op string, err error) error {
	msg := fmt.Sprintf("%s: %v", op, err)
	switch {
	case karvi.IsNoBrief(err):
		return temporal.NewNonRetryableApplicationError(msg, ErrNoBrief, err)
	case errors.Is(err, sink.ErrBoardCancelled) || errors.Is(err, sink.ErrTaskGone):
		return temporal.NewNonRetryableApplicationError(msg, ErrSinkRejected, err)
	case karvi.IsRetryable(err):
		return fmt.Errorf("%s: %w", op, err)
	case karvi.IsPermanent(err):
		return temporal.NewNonRetryableApplicationError(msg, ErrSinkRejected, err)
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
}

// patchProgress (a field of Activities) remembers, for each PatchBrief
// execution (workflow run and local activity id), how many patches of its
// batch the sink acknowledged. A retry of the same batch starts after them:
// re-sending them would put older bodies after newer ones, and karvi's
// brief, whose log travels whole in every patch, would move backwards until
// the retry caught up. Only a worker crash forgets the progress; the batch
// is then sent whole again, which still converges to the same brief.

// sendPatches is PatchBrief's body: the patches in order, resuming a retried
// batch after the patches already delivered.
func (a *Activities) sendPatches(ctx context.Context, req PatchRequest) error {
	key := ""
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		key = info.WorkflowExecution.RunID + "/" + info.ActivityID
	}
	start := 0
	if v, ok := a.patchProgress.Load(key); ok && key != "" {
		start = v.(int)
	}
	for i := start; i < len(req.Patches); i++ {
		if err := a.Sink.PatchBrief(ctx, req.TaskID, req.Patches[i].Body); err != nil {
			err = sinkError("patch brief of task "+req.TaskID, err)
			var appErr *temporal.ApplicationError
			if key != "" {
				if errors.As(err, &appErr) && appErr.NonRetryable() {
					a.patchProgress.Delete(key) // no retry will come
				} else {
					a.patchProgress.Store(key, i)
				}
			}
			return err
		}
	}
	if key != "" {
		a.patchProgress.Delete(key)
	}
	return nil
}

// StatusRequest sets the karvi task status.
type StatusRequest struct {
	TaskID string           `json:"taskId"`
	Update TaskStatusUpdate `json:"update"`
	// Stream carries the workflow's steps (this status among them), stored
	// before the status is written.
	Stream *StreamInfo `json:"stream,omitempty"`
	// LeaveAccount is the agent account the task leaves with this write,
	// its last (a task on its worker's account, pause_account.go): the
	// leave costs the task's history nothing of its own. Best effort: the
	// account drops a member whose workflow is gone when it next signals.
	LeaveAccount string `json:"leaveAccount,omitempty"`
}

// TaskStatusUpdate is a task status change as the workflow asks for it.
type TaskStatusUpdate struct {
	// Status is the karvi task status to reach; the sink walks karvi's
	// legal transitions to it.
	Status mapping.TaskStatus `json:"status"`
	// Reason becomes task.blocker.reason when Status is blocked.
	Reason string `json:"reason,omitempty"`
	// DispatchState and LastError are the dispatch record's state and last
	// error; an empty DispatchState leaves the record alone.
	DispatchState mapping.DispatchState `json:"dispatchState,omitempty"`
	LastError     string                `json:"lastError,omitempty"`
	// PlanID is the dispatch's planId; PlanName the conductor's plan name.
	PlanID   string `json:"planId,omitempty"`
	PlanName string `json:"planName,omitempty"`
	// AskedAt is the blocker's time (RFC 3339), workflow time, so a retried
	// activity writes the same value.
	AskedAt string `json:"askedAt,omitempty"`
}

func (u TaskStatusUpdate) sink() sink.StatusUpdate {
	return sink.StatusUpdate{
		Status: string(u.Status), Reason: u.Reason,
		DispatchState: string(u.DispatchState), LastError: u.LastError,
		PlanID: u.PlanID, PlanName: u.PlanName, AskedAt: u.AskedAt,
	}
}
