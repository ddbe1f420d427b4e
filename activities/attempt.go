package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/mapping"
)

// StartAttemptRequest begins one attempt of a task.
type StartAttemptRequest struct {
	Dispatch mapping.DispatchPlan `json:"dispatch"`
	Attempt  int                  `json:"attempt"`
	// Base carries the dispatch's plan id and the workflow's time for the
	// status write.
	Base TaskStatusUpdate `json:"base"`
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
}

// StartAttempt does the steps that begin an attempt, in order: plan.yaml
// on disk, the brief's skeleton, the task dispatched, the conductor
// spawned. Each step is idempotent, and none of them can race the
// attempt's event delivery, which starts only after this returns: a retry
// after a crash redoes them all and re-attaches to the conductor already
// running. One activity instead of four keeps the task's history short.
func (a *Activities) StartAttempt(ctx context.Context, req StartAttemptRequest) (StartAttemptResult, error) {
	stopBeat := heartbeat(ctx, heartbeatEvery)
	defer stopBeat()
	info, err := a.PreparePlan(ctx, PrepareRequest{Dispatch: req.Dispatch, Attempt: req.Attempt})
	if err != nil {
		return StartAttemptResult{}, err
	}
	res := StartAttemptResult{Plan: info}
	taskID := req.Dispatch.TaskID
	d := &delivery{a: a, req: DeliverRequest{TaskID: taskID}}
	brief := mapping.NewBriefState(taskID, info.Summary)
	var enc mapping.BriefEncoder
	err = d.retry(ctx, func() error { return a.Sink.PatchBrief(ctx, taskID, enc.Init(&brief).Body) })
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.NonRetryable():
		res.SinkProblem = err.Error()
	case err != nil:
		return StartAttemptResult{}, err
	}
	u := req.Base
	u.Status, u.DispatchState, u.PlanName = mapping.TaskDispatched, mapping.DispatchStateFor(mapping.PlanPending), info.Summary.Name
	if err := d.retry(ctx, func() error { return a.Sink.SetStatus(ctx, taskID, u.sink()) }); err != nil {
		return StartAttemptResult{}, err
	}
	h, err := a.StartConductor(ctx, StartRequest{Plan: info})
	if errors.As(err, &appErr) && appErr.Type() == ErrConductorStart {
		res.StartError = appErr.Message()
		return res, nil
	}
	if err != nil {
		return StartAttemptResult{}, err
	}
	res.Conductor = &h
	return res, nil
}
