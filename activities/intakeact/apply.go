package intakeact

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/intake"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/intakeflow/intakeapi"
	"karvi-edda-temporal/workflows/runflow/runapi"
	"karvi-edda-temporal/workflows/taskflow/taskapi"
)

// Apply carries out one action of the intake. Every kind is idempotent,
// since a retry, or a replay after the worker was killed, may send it
// again: a start is refused by Temporal when the task's workflow id was
// ever used (the task ran before, or this start already happened); a
// redispatch starts a new workflow only when the last one closed and was
// not itself this redispatch (the attempt is in its memo); abort, pause
// and resume asked twice do nothing more; a block already written is
// seen on the board.
func (a *Activities) Apply(ctx context.Context, in intakeapi.ApplyInput) (intakeapi.ApplyResult, error) {
	act := in.Action
	var res string
	var err error
	switch act.Kind {
	case intake.KindStart:
		res, err = a.start(ctx, in, false)
	case intake.KindRedispatch:
		res, err = a.redispatch(ctx, in)
	case intake.KindAbort:
		res, err = a.abort(ctx, act)
	case intake.KindBlock:
		res, err = a.block(ctx, in)
	case intake.KindStartRun:
		res, err = a.startRun(ctx, in)
	case intake.KindPauseRun, intake.KindResumeRun:
		res, err = a.pauseRun(ctx, act)
	default:
		return intakeapi.ApplyResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown action kind %q", act.Kind), "BadAction", nil)
	}
	return intakeapi.ApplyResult{Result: res}, err
}

// tuning is the tuning of a task or run the intake starts: none at real
// time, else the intake's time scale (the worker's when the intake's
// input names none).
func (a *Activities) tuning(in intakeapi.ApplyInput) *taskapi.Tuning {
	s := timescale.Scale(in.TimeScale)
	if !s.Scaled() {
		s = a.Scale
	}
	return taskapi.WithScale(nil, s)
}

func (a *Activities) start(ctx context.Context, in intakeapi.ApplyInput, again bool) (string, error) {
	act := in.Action
	if act.Dispatch == nil {
		return "", temporal.NewNonRetryableApplicationError("start of task "+act.TaskID+" without a dispatch plan", "BadAction", nil)
	}
	id := taskapi.WorkflowID(act.TaskID)
	tin := taskapi.TaskInput{Dispatch: *act.Dispatch, Attempt: 1, Tuning: a.tuning(in)}
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	if again {
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		tin.Attempt = act.Attempt
		var prev taskapi.Result
		if err := a.Temporal.GetWorkflow(ctx, id, "").Get(ctx, &prev); err == nil && prev.Attempt > 0 {
			tin.Attempt = prev.Attempt + 1
		}
	}
	summary, details := taskapi.StartSummary(tin.Dispatch, tin.Attempt)
	run, err := a.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                in.TaskQueue,
		StaticSummary:                            summary,
		StaticDetails:                            details,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    reuse,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     map[string]any{MemoAttempt: act.Attempt},
	}, taskapi.TaskWorkflowName, tin)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		return fmt.Sprintf("not started again: workflow %s already exists (run %s)", id, started.RunId), nil
	case err != nil:
		return "", fmt.Errorf("start workflow %s: %w", id, err)
	}
	return fmt.Sprintf("started %s run %s (attempt %d)", id, run.GetRunID(), tin.Attempt), nil
}

func (a *Activities) redispatch(ctx context.Context, in intakeapi.ApplyInput) (string, error) {
	act := in.Action
	id := taskapi.WorkflowID(act.TaskID)
	if act.WorkflowID != id {
		return a.redispatchInRun(ctx, in)
	}
	desc, err := a.Temporal.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return a.start(ctx, in, false)
	}
	if err != nil {
		return "", fmt.Errorf("describe %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if memoAttempt(info.GetMemo().GetFields()) >= act.Attempt {
		return fmt.Sprintf("already redispatched: run %s is dispatch %d", info.GetExecution().GetRunId(), act.Attempt), nil
	}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		err := a.Temporal.SignalWorkflow(ctx, id, "", taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: act.Reason})
		if err != nil {
			return "", fmt.Errorf("signal redispatch to %s: %w", id, err)
		}
		return "signalled redispatch to the running " + id, nil
	}
	return a.start(ctx, in, true)
}

// redispatchInRun redispatches a task of a run (act.WorkflowID is the
// run's). While the run runs and the task failed or paused in it, the run
// is asked to retry it, as `starter run retry` does: the run gives it new
// attempts, its status.json follows and its dependents run after it.
// Otherwise (the run ended, or the task completed in it) the task runs
// again on its own, with the next attempt, under its own workflow id (the
// run's child of that id has closed); the run knows nothing of it. A task
// the run runs again already (a retry sent before) is left to the run.
func (a *Activities) redispatchInRun(ctx context.Context, in intakeapi.ApplyInput) (string, error) {
	act := in.Action
	runID := act.WorkflowID
	desc, err := a.Temporal.DescribeWorkflowExecution(ctx, runID, "")
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return "", fmt.Errorf("describe run %s: %w", runID, err)
	}
	if err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		v, err := a.Temporal.QueryWorkflow(ctx, runID, "", runapi.QueryStatus)
		if err != nil {
			return "", fmt.Errorf("query status of run %s: %w", runID, err)
		}
		var doc runstatus.Status
		if err := v.Get(&doc); err != nil {
			return "", fmt.Errorf("status of run %s: %w", runID, err)
		}
		state := runstatus.TaskState("not a task")
		if t := doc.Tasks[act.TaskID]; t != nil {
			state = t.Status
		}
		switch state {
		case runstatus.TaskFailed, runstatus.TaskPaused, runstatus.TaskNeedsHumanRebase:
			return a.retryInRun(ctx, runID, runapi.TaskRequest{Task: act.TaskID, Reason: act.Reason})
		case runstatus.TaskDone, runstatus.TaskSkipped:
		default:
			return fmt.Sprintf("not redispatched: task %s is %s in run %s, which runs it", act.TaskID, state, runID), nil
		}
	}
	id := taskapi.WorkflowID(act.TaskID)
	tdesc, err := a.Temporal.DescribeWorkflowExecution(ctx, id, "")
	again := true
	switch {
	case errors.As(err, &nf):
		again = false // the run never started it
	case err != nil:
		return "", fmt.Errorf("describe %s: %w", id, err)
	default:
		info := tdesc.GetWorkflowExecutionInfo()
		if memoAttempt(info.GetMemo().GetFields()) >= act.Attempt {
			return fmt.Sprintf("already redispatched: run %s is dispatch %d", info.GetExecution().GetRunId(), act.Attempt), nil
		}
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return fmt.Sprintf("not redispatched: %s is running (run %s started it)", id, runID), nil
		}
	}
	res, err := a.start(ctx, in, again)
	if err != nil {
		return "", err
	}
	return res + ", outside run " + runID + ": the run's status.json is not changed and its dependents do not run again", nil
}

// retryInRun sends the retry update for one task to a running run.
func (a *Activities) retryInRun(ctx context.Context, runID string, req runapi.TaskRequest) (string, error) {
	h, err := a.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: runID, UpdateName: runapi.UpdateRetry, Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr):
		// The run refused it (the task changed since the query): a retry
		// of this action would be refused the same way.
		return "retry of task " + req.Task + " refused by run " + runID + ": " + appErr.Message(), nil
	case err != nil:
		return "", fmt.Errorf("retry task %s in run %s: %w", req.Task, runID, err)
	}
	return "retried task " + req.Task + " in run " + runID, nil
}

// abort aborts a task's workflow. A task of a run runs in a workflow of
// its own id too (the run's child), so the same signal aborts it, and the
// run then does what it does for any aborted task: the task fails, its
// dependents are blocked, the rest of the run goes on. A run's task the
// run has not started yet is aborted by the follower as soon as the run
// starts it (Follow: the claim stays marked aborted until its workflow
// ends).
func (a *Activities) abort(ctx context.Context, act intake.Action) (string, error) {
	id := taskapi.WorkflowID(act.TaskID)
	inRun := act.WorkflowID != id
	err := a.Temporal.SignalWorkflow(ctx, id, "", taskapi.SignalAbort, taskapi.AbortSignal{Reason: act.Reason})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf) && inRun:
		return "task " + act.TaskID + " of run " + act.WorkflowID + " has not started yet: aborted when the run starts it", nil
	case errors.As(err, &nf):
		return "nothing to abort: " + id + " is not running", nil
	case err != nil:
		return "", fmt.Errorf("signal abort to %s: %w", id, err)
	}
	if inRun {
		return "sent abort to " + id + " (a task of run " + act.WorkflowID + ")", nil
	}
	return "sent abort to " + id, nil
}

// block marks a task the intake cannot run blocked on karvi with the
// reason. karvi refuses dispatched -> blocked, so it goes through
// in_progress.
func (a *Activities) block(ctx context.Context, in intakeapi.ApplyInput) (string, error) {
	act := in.Action
	kc, err := a.Karvi(in.BoardURL)
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError(err.Error(), "BadBoardURL", err)
	}
	t, err := kc.GetTaskFresh(ctx, act.TaskID)
	if err != nil {
		return "", a.karviErr(err)
	}
	switch t.Status {
	case intake.StatusBlocked:
		return "already blocked", nil
	case intake.StatusDispatched:
		if err := kc.SetTaskStatus(ctx, act.TaskID, intake.StatusInProgress, ""); err != nil {
			return "", a.karviErr(err)
		}
	case intake.StatusInProgress:
	default:
		return fmt.Sprintf("not blocked: the task is %s on karvi now (reason was: %s)", t.Status, act.Reason), nil
	}
	if err := kc.SetTaskStatus(ctx, act.TaskID, intake.StatusBlocked, act.Reason); err != nil {
		return "", a.karviErr(err)
	}
	return "blocked on karvi: " + act.Reason, nil
}

// karviErr makes a karvi refusal that a retry cannot change (an illegal
// transition, a task gone) non-retryable; the rest is retried.
func (a *Activities) karviErr(err error) error {
	switch karvi.KindOf(err) {
	case karvi.KindTransient, karvi.KindConflict:
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "KarviRefused", err)
}

func (a *Activities) startRun(ctx context.Context, in intakeapi.ApplyInput) (string, error) {
	act := in.Action
	run, err := a.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       act.WorkflowID,
		TaskQueue:                                in.TaskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, runapi.RunWorkflowName, runapi.RunInput{Run: act.RunFile, TaskQueue: in.TaskQueue, Tuning: a.tuning(in)})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	res := ""
	switch {
	case errors.As(err, &started):
		res = fmt.Sprintf("not started again: run %s already exists (run %s)", act.WorkflowID, started.RunId)
	case err != nil:
		return "", fmt.Errorf("start run %s: %w", act.WorkflowID, err)
	default:
		res = fmt.Sprintf("started run %s (run %s)", act.WorkflowID, run.GetRunID())
	}
	if act.Paused {
		r, err := a.update(ctx, act.WorkflowID, runapi.UpdatePause)
		if err != nil {
			return "", err
		}
		res += "; " + r
	}
	return res, nil
}

func (a *Activities) pauseRun(ctx context.Context, act intake.Action) (string, error) {
	name := runapi.UpdatePause
	if act.Kind == intake.KindResumeRun {
		name = runapi.UpdateResume
	}
	return a.update(ctx, act.WorkflowID, name)
}

func (a *Activities) update(ctx context.Context, workflowID, name string) (string, error) {
	h, err := a.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "not " + name + "d: run " + workflowID + " is not running", nil
	}
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			// The run refused it (already paused, say): nothing to retry.
			return name + " refused by " + workflowID + ": " + appErr.Message(), nil
		}
		return "", fmt.Errorf("%s %s: %w", name, workflowID, err)
	}
	return name + "d " + workflowID, nil
}
