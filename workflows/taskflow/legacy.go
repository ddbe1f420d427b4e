package taskflow

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// The earlier path of an attempt, kept only so that histories recorded
// before delivery moved into the tail replay (see versionDeliverInTail): a
// plan activity, a skeleton patch, a status activity and a start activity,
// then one tail activity per batch of events whose patches the workflow
// sent in a local activity. New workflows never take it.

func (r *taskRun) prepare() error {
	a := &r.st.Current
	var info taskact.PlanInfo
	summary := fmt.Sprintf("plan attempt %d of task %s", a.N, r.st.Dispatch.TaskID)
	err := workflow.ExecuteActivity(prepareOptions(r.ctx, summary), acts.PreparePlan,
		taskact.PrepareRequest{Dispatch: r.st.Dispatch, Attempt: a.N, Nonce: a.Nonce}).Get(r.ctx, &info)
	if err != nil {
		return fmt.Errorf("prepare plan for attempt %d: %w", a.N, err)
	}
	a.Plan = &info
	a.Brief = mapping.NewBriefState(r.st.Dispatch.TaskID, info.Summary)
	a.Cursor = taskact.TailCursor{}
	a.LastEventAt = workflow.Now(r.ctx)
	r.sendPatches([]mapping.Patch{r.enc.Init(&a.Brief)})
	if err := r.setStatus(taskact.TaskStatusUpdate{
		Status:        mapping.TaskDispatched,
		DispatchState: mapping.DispatchStateFor(mapping.PlanPending),
	}); err != nil {
		return err
	}
	a.Stage = taskapi.StageStart
	r.upsertSearch()
	return nil
}

func (r *taskRun) start() error {
	a := &r.st.Current
	var h taskact.ConductorHandle
	err := workflow.ExecuteActivity(startOptions(r.ctx, "start conductor "+a.PlanName()), acts.StartConductor,
		taskact.StartRequest{Plan: *a.Plan}).Get(r.ctx, &h)
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == taskact.ErrConductorStart {
			r.decide(mapping.CrashOutcome(r.currentPhase(), -1, "conductor could not start: "+appErr.Message()))
			return nil
		}
		return fmt.Errorf("start conductor for %s: %w", a.PlanName(), err)
	}
	a.Conductor = &h
	a.LastEventAt = workflow.Now(r.ctx)
	a.Stage = taskapi.StageRunning
	return nil
}

// tail waits for the next batch of events, or a signal, whichever is first.
func (r *taskRun) tail() error {
	a := &r.st.Current
	wait := r.pollWait()
	actCtx, cancel := workflow.WithCancel(tailOptions(r.ctx, wait, tailSummary("tail", a)))
	defer cancel()
	fut := workflow.ExecuteActivity(actCtx, acts.TailEvents, taskact.TailRequest{
		Plan: *a.Plan, Handle: *a.Conductor, Cursor: a.Cursor, MaxWait: wait})

	var res taskact.TailResult
	var tailErr error
	got := false
	sel := workflow.NewSelector(r.ctx)
	sel.AddFuture(fut, func(f workflow.Future) {
		got = true
		tailErr = f.Get(r.ctx, &res)
	})
	r.addSignalReceivers(sel)
	sel.Select(r.ctx)
	if !got {
		// A signal came first. The poll is cancelled and its result, if any,
		// dropped: the cursor did not move, so the next poll reads it again.
		return nil
	}
	if tailErr != nil {
		return fmt.Errorf("tail events of %s: %w", a.PlanName(), tailErr)
	}
	r.st.Polls++
	r.apply(res)
	if a.Outcome != nil {
		a.Stage = taskapi.StageFinish
		return nil
	}
	if res.Exited {
		r.decide(r.exitOutcome(res.Exit()))
		return nil
	}
	return r.stopIfSilent()
}

// apply reduces a batch into the brief, sends the resulting patches in
// order, and notes a terminal event's outcome.
func (r *taskRun) apply(res taskact.TailResult) {
	a := &r.st.Current
	a.Cursor = res.Next
	if res.Exited {
		a.FinalState = res.State
	}
	r.st.Counts.Malformed += res.Malformed
	if res.MalformedSample != "" {
		r.st.Counts.LastMalformed = res.MalformedSample
	}
	if len(res.Events) == 0 {
		return
	}
	a.LastEventAt = workflow.Now(r.ctx)
	var patches []mapping.Patch
	started := false
	for _, ev := range res.Events {
		if c, ok := a.Brief.Reduce(ev); ok {
			patches = append(patches, r.enc.Patch(&a.Brief, c))
		}
		a.Events++
		r.st.Counts.EventsApplied++
		if ev.Type == mapping.EventPhaseStart {
			started = true
		}
		if ev.IsTerminal() && a.Outcome == nil {
			if o, ok := mapping.OutcomeFromEvent(ev, a.Brief); ok {
				a.Outcome = &o
			}
		}
	}
	// Before the first wait: a query answered while the patches go out
	// sees details that match the brief.
	r.showDetails()
	r.sendPatches(patches)
	if started && r.st.TaskStatus != mapping.TaskInProgress && a.Outcome == nil {
		if err := r.setStatus(taskact.TaskStatusUpdate{
			Status:        mapping.TaskInProgress,
			DispatchState: mapping.DispatchStateFor(mapping.PlanRunning),
		}); err != nil {
			// The status write failed for good (karvi refused it); the run
			// goes on and the problem is visible in the status query.
			r.st.SinkProblem = err.Error()
		}
	}
	r.upsertSearch()
}

// stopConductorV1 is stopConductor on the earlier path.
func (r *taskRun) stopConductorV1() (*mapping.Outcome, error) {
	a := &r.st.Current
	if a.Conductor == nil || a.Plan == nil {
		return nil, nil
	}
	stop := fmt.Sprintf("stop conductor %s (process group %d)", a.PlanName(), a.Conductor.PGID)
	err := workflow.ExecuteActivity(abortOptions(r.ctx, stop), acts.AbortConductor,
		taskact.AbortRequest{Plan: *a.Plan, Handle: *a.Conductor}).Get(r.ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("stop conductor of %s: %w", a.PlanName(), err)
	}
	// The process group is gone: one more read drains the log to its end.
	var res taskact.TailResult
	err = workflow.ExecuteActivity(tailOptions(r.ctx, 0, tailSummary("drain", a)), acts.TailEvents, taskact.TailRequest{
		Plan: *a.Plan, Handle: *a.Conductor, Cursor: a.Cursor}).Get(r.ctx, &res)
	if err != nil {
		return nil, fmt.Errorf("drain events of %s: %w", a.PlanName(), err)
	}
	before := a.Outcome
	r.apply(res)
	completed := a.Outcome
	a.Outcome = before
	a.Conductor = nil
	if completed != nil && completed.TaskStatus == mapping.TaskCompleted {
		return completed, nil
	}
	return nil, nil
}
