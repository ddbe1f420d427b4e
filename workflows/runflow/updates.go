package runflow

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/runstatus"
)

// setUpdateHandlers registers pause, resume, skip, retry, budget and abort. Each
// validator refuses a request that does not apply, so the caller gets the
// reason and history records nothing; each handler only changes state and
// wakes the loop, so none holds an update open (Temporal allows only a few
// in flight per workflow).
func (r *runFlow) setUpdateHandlers() error {
	type handler struct {
		name, what string
		fn         any
		validate   any
	}
	hs := []handler{
		{runapi.UpdatePause, "start no new task; running ones go on", func(workflow.Context) error { return r.apply(func(s *runstatus.Status) error { return s.Pause() }) },
			func() error { return r.check(func(s *runstatus.Status) error { return s.Pause() }) }},
		{runapi.UpdateResume, "let a paused run start tasks again", func(workflow.Context) error { return r.resume() },
			func() error { return r.check(func(s *runstatus.Status) error { return s.Resume() }) }},
		{runapi.UpdateSkip, `{"task": id}: give up on a task; its dependents treat it as done`, func(_ workflow.Context, req runapi.TaskRequest) error { return r.apply(skip(req)) },
			func(req runapi.TaskRequest) error { return r.check(skip(req)) }},
		{runapi.UpdateRetry, `{"task": id}: a failed task again, or a rebased task's merge`, func(_ workflow.Context, req runapi.TaskRequest) error { return r.retry(req, true) },
			func(req runapi.TaskRequest) error { return r.retry(req, false) }},
		{runapi.UpdateBudget, `{"limitUsd": n, "action": a}: set the run's budget; a run paused for its budget goes on once it is not spent`,
			func(_ workflow.Context, req runapi.BudgetRequest) error { return r.setBudget(req, true) },
			func(req runapi.BudgetRequest) error { return r.setBudget(req, false) }},
		{runapi.UpdateAbort, `{"reason": text}: abort every running task and end the run`, func(_ workflow.Context, req runapi.AbortRequest) error {
			if err := r.checkOpen("abort"); err != nil {
				return err
			}
			r.st.Aborting, r.st.AbortReason = true, req.Reason
			r.changed()
			r.wake = true
			return nil
		}, func(runapi.AbortRequest) error { return r.checkOpen("abort") }},
	}
	for _, h := range hs {
		if err := workflow.SetUpdateHandlerWithOptions(r.ctx, h.name, h.fn,
			workflow.UpdateHandlerOptions{Validator: h.validate, Description: h.what}); err != nil {
			return fmt.Errorf("register %s update: %w", h.name, err)
		}
	}
	return nil
}

// apply runs a change on the document and wakes the loop.
func (r *runFlow) apply(change func(*runstatus.Status) error) error {
	if err := r.checkOpen("change"); err != nil {
		return err
	}
	if err := change(&r.st.Doc); err != nil {
		return err
	}
	r.changed()
	r.wake = true
	return nil
}

// check tries a change on a copy of the document: the validator's answer.
func (r *runFlow) check(change func(*runstatus.Status) error) error {
	if err := r.checkOpen("change"); err != nil {
		return err
	}
	c := r.st.Doc.Clone()
	return change(&c)
}

// checkOpen refuses requests once the run is ending.
func (r *runFlow) checkOpen(op string) error {
	if r.st.Aborting {
		return fmt.Errorf("run %s is being aborted: cannot %s it", r.run.Slug, op)
	}
	if s := r.st.Doc.Status; s == runstatus.RunComplete || s == runstatus.RunPartial {
		return fmt.Errorf("run %s has ended (%s): cannot %s it", r.run.Slug, s, op)
	}
	return nil
}

func skip(req runapi.TaskRequest) func(*runstatus.Status) error {
	return func(s *runstatus.Status) error { return s.Skip(req.Task) }
}

// retry queues a failed or stalled task again. A task waiting for a person
// after a merge conflict is retried by merging its branch again: the person
// has rebased it.
func (r *runFlow) retry(req runapi.TaskRequest, apply bool) error {
	if err := r.checkOpen("retry a task of"); err != nil {
		return err
	}
	if t := r.st.Doc.Tasks[req.Task]; t != nil && t.Status == runstatus.TaskNeedsHumanRebase {
		return r.retryMerge(req.Task, apply)
	}
	if !apply {
		return r.check(func(s *runstatus.Status) error { return s.Retry(req.Task) })
	}
	return r.apply(func(s *runstatus.Status) error { return s.Retry(req.Task) })
}
