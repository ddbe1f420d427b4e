package intentact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/intent"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/intent"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
)

// Errors of the intent activities that retrying cannot help.
const (
	// ErrTargetBusy: the target's workflow is running, and no fire of
	// this intent started it.
	ErrTargetBusy = "TargetBusy"
	// ErrBadTarget: the target's file no longer reads as it did.
	ErrBadTarget = "BadTarget"
)

// Activities are the side effects of an intent's fire: starting its
// target as the ordinary task or run workflow it is, waiting for it, and
// reading or pausing the intent's schedule. They need a Temporal client
// and nothing of the conductor.
type Activities struct {
	Temporal client.Client
	// Scale is the worker's time scale: the tasks and runs a fire starts
	// carry it (taskapi.Tuning.TimeScale). The schedule itself keeps the
	// wall clock.
	Scale timescale.Scale
}

// StartTargetRequest asks a fire's target to start.
type StartTargetRequest struct {
	Intent string        `json:"intent"`
	FireID string        `json:"fireId"`
	Target intent.Target `json:"target"`
	// TaskQueue is where the target runs: the fire's own queue.
	TaskQueue string `json:"taskQueue"`
	// NextAttempt is the least attempt a dispatch's task starts at: one
	// past the last this intent started. A task whose last workflow
	// ended with a result starts one past that attempt, if later.
	NextAttempt int `json:"nextAttempt,omitempty"`
}

// StartTargetResult names the target's workflow.
type StartTargetResult struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	Attempt    int    `json:"attempt,omitempty"`
	// Adopted: the target was running already, started by an earlier fire
	// of the intent; this fire waits for it instead of starting another.
	Adopted bool `json:"adopted,omitempty"`
}

// targetMarks are the memo a fire writes on the workflow it starts.
type targetMarks struct{ intent, fire string }

// StartTarget starts the target's workflow as `starter start` or `starter
// run start` would, marked with the intent and the fire. It is idempotent:
// a retry finds the workflow its earlier try started and returns it.
func (a *Activities) StartTarget(ctx context.Context, req StartTargetRequest) (StartTargetResult, error) {
	if a.Temporal == nil {
		return StartTargetResult{}, temporal.NewNonRetryableApplicationError(
			"the worker has no Temporal client for the intent activities", "NoClient", nil)
	}
	id, err := targetWorkflowID(req.Target)
	if err != nil {
		return StartTargetResult{}, err
	}
	for try := 0; ; try++ {
		res, started, err := a.existing(ctx, req, id)
		if err != nil || started {
			return res, err
		}
		res, err = a.start(ctx, req, id, res.Attempt)
		var already *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &already) && try == 0 {
			continue // started by someone meanwhile: look at it again
		}
		return res, err
	}
}

func targetWorkflowID(t intent.Target) (string, error) {
	switch t.Kind {
	case intent.TargetDispatch:
		return taskapi.WorkflowID(t.ID), nil
	case intent.TargetRun:
		return runapi.WorkflowID(t.ID), nil
	}
	return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown target kind %q", t.Kind), ErrBadTarget, nil)
}

// existing looks at the target's current workflow: a running one is this
// fire's (done), this intent's (adopted) or someone else's (busy); a
// closed task's result gives the next attempt.
func (a *Activities) existing(ctx context.Context, req StartTargetRequest, id string) (res StartTargetResult, started bool, err error) {
	res.Attempt = max(req.NextAttempt, 1)
	desc, err := a.Temporal.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return res, false, nil
	case err != nil:
		return res, false, fmt.Errorf("describe %s: %w", id, err)
	}
	runID := desc.WorkflowExecution.RunID
	if desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		var marks targetMarks
		_ = desc.GetMemoValue(intentapi.MemoIntent, &marks.intent)
		_ = desc.GetMemoValue(intentapi.MemoFire, &marks.fire)
		switch {
		case marks.fire == req.FireID:
			return StartTargetResult{WorkflowID: id, RunID: runID, Attempt: res.Attempt}, true, nil
		case marks.intent == req.Intent:
			return StartTargetResult{WorkflowID: id, RunID: runID, Adopted: true}, true, nil
		}
		return res, false, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s already has a running workflow %s (run %s) that intent %s did not start", req.Target, id, runID, req.Intent),
			ErrTargetBusy, nil)
	}
	if req.Target.Kind == intent.TargetDispatch {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res.Attempt = taskapi.Tasks{Client: a.Temporal}.NextAttempt(rctx, req.Target.ID, "", res.Attempt)
	}
	return res, false, nil
}

func (a *Activities) start(ctx context.Context, req StartTargetRequest, id string, attempt int) (StartTargetResult, error) {
	memo := map[string]any{intentapi.MemoIntent: req.Intent, intentapi.MemoFire: req.FireID}
	by := fmt.Sprintf("\n\nStarted by schedule intent **%s**, fire `%s`.", req.Intent, req.FireID)
	var (
		run client.WorkflowRun
		err error
	)
	switch req.Target.Kind {
	case intent.TargetDispatch:
		d, perr := mapping.ParseDispatchPlan(req.Target.Data)
		if perr != nil {
			return StartTargetResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("dispatch plan: %v", perr), ErrBadTarget, perr)
		}
		tasks := taskapi.Tasks{Client: a.Temporal, TaskQueue: req.TaskQueue}
		run, err = tasks.Start(ctx, taskapi.TaskInput{Dispatch: d, Attempt: attempt, Tuning: taskapi.WithScale(nil, a.Scale)},
			taskapi.StartOptions{Memo: memo, StartedBy: by})
	case intent.TargetRun:
		if _, err := runplan.Parse(req.Target.Data); err != nil {
			return StartTargetResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadTarget, err)
		}
		runs := runapi.Runs{Client: a.Temporal, TaskQueue: req.TaskQueue}
		run, err = runs.Start(ctx, runapi.RunInput{Run: json.RawMessage(req.Target.Data), Tuning: taskapi.WithScale(nil, a.Scale)},
			runapi.StartOptions{Memo: memo, StartedBy: by})
		attempt = 0
	default:
		return StartTargetResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown target kind %q", req.Target.Kind), ErrBadTarget, nil)
	}
	if err != nil {
		return StartTargetResult{}, fmt.Errorf("start %s: %w", id, err)
	}
	return StartTargetResult{WorkflowID: id, RunID: run.GetRunID(), Attempt: attempt}, nil
}

// AwaitTargetRequest names the target workflow a fire waits for.
type AwaitTargetRequest struct {
	Target     intent.Target `json:"target"`
	WorkflowID string        `json:"workflowId"`
	RunID      string        `json:"runId"`
}

// AwaitTargetResult is how the target ended: an outcome, or why there is
// none (the workflow failed, was terminated, timed out or was cancelled).
type AwaitTargetResult struct {
	Outcome *intent.Outcome `json:"outcome,omitempty"`
	Failure string          `json:"failure,omitempty"`
}

// AwaitTarget waits for the target's workflow to end, following its
// continue-as-new chain, and reads its outcome. It heartbeats while it
// waits, so a dead worker's wait resumes on another; waiting again is
// harmless.
func (a *Activities) AwaitTarget(ctx context.Context, req AwaitTargetRequest) (AwaitTargetResult, error) {
	if a.Temporal == nil {
		return AwaitTargetResult{}, temporal.NewNonRetryableApplicationError(
			"the worker has no Temporal client for the intent activities", "NoClient", nil)
	}
	var raw json.RawMessage
	failure, err := activities.AwaitWorkflow(ctx, a.Temporal, req.WorkflowID, req.RunID, &raw)
	switch {
	case err != nil:
		return AwaitTargetResult{}, err
	case failure != "":
		return AwaitTargetResult{Failure: failure}, nil
	}
	o, err := outcomeOf(req, raw)
	if err != nil {
		return AwaitTargetResult{Failure: err.Error()}, nil
	}
	return AwaitTargetResult{Outcome: &o}, nil
}

// outcomeOf reads a task's or a run's result.
func outcomeOf(req AwaitTargetRequest, raw json.RawMessage) (intent.Outcome, error) {
	o := intent.Outcome{Target: req.Target.String(), WorkflowID: req.WorkflowID, RunID: req.RunID}
	switch req.Target.Kind {
	case intent.TargetDispatch:
		var res taskapi.Result
		if err := json.Unmarshal(raw, &res); err != nil {
			return o, fmt.Errorf("%s: unreadable task result: %v", req.WorkflowID, err)
		}
		o.Attempt = res.Attempt
		o.Status = string(res.Outcome.TaskStatus)
		o.Completed = res.Outcome.TaskStatus == mapping.TaskCompleted
		o.Detail = res.Outcome.BlockerReason
		if o.Detail == "" {
			o.Detail = res.Outcome.LastError
		}
	case intent.TargetRun:
		var doc runstatus.Status
		if err := json.Unmarshal(raw, &doc); err != nil {
			return o, fmt.Errorf("%s: unreadable run result: %v", req.WorkflowID, err)
		}
		o.Status = string(doc.Status)
		o.Completed = doc.Status == runstatus.RunComplete
		if s := doc.Summary; s != nil {
			o.Detail = fmt.Sprintf("%d of %d tasks done, %d failed", s.Successful, s.TotalTasks, s.Failed)
		}
	}
	if o.Status == "" {
		return o, fmt.Errorf("%s ended with no status in its result", req.WorkflowID)
	}
	return o, nil
}

// IntentSchedule is what a fire reads of its intent's schedule.
type IntentSchedule struct {
	Exists bool   `json:"exists"`
	Paused bool   `json:"paused,omitempty"`
	Note   string `json:"note,omitempty"`
	// MissedCatchUpWindow counts the fire times the schedule let pass as
	// older than its catch-up window.
	MissedCatchUpWindow int `json:"missedCatchUpWindow,omitempty"`
}

// InspectIntent reads the intent's schedule.
func (a *Activities) InspectIntent(ctx context.Context, scheduleID string) (IntentSchedule, error) {
	desc, err := a.Temporal.ScheduleClient().GetHandle(ctx, scheduleID).Describe(ctx)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return IntentSchedule{}, nil
	case err != nil:
		return IntentSchedule{}, fmt.Errorf("describe schedule %s: %w", scheduleID, err)
	}
	s := IntentSchedule{Exists: true, MissedCatchUpWindow: desc.Info.NumActionsMissedCatchupWindow}
	if st := desc.Schedule.State; st != nil {
		s.Paused, s.Note = st.Paused, st.Note
	}
	return s, nil
}

// PauseRequest pauses an intent's schedule with a note saying why.
type PauseRequest struct {
	ScheduleID string `json:"scheduleId"`
	Note       string `json:"note"`
}

// PauseIntent pauses the schedule. One that no longer exists (the intent
// was cancelled) needs no pause.
func (a *Activities) PauseIntent(ctx context.Context, req PauseRequest) error {
	err := a.Temporal.ScheduleClient().GetHandle(ctx, req.ScheduleID).Pause(ctx, client.SchedulePauseOptions{Note: req.Note})
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("pause schedule %s: %w", req.ScheduleID, err)
	}
	return nil
}
