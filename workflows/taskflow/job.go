package taskflow

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/mapping"
)

// The job query: the task as a job of attempts (package jobview). The
// delivering tail folds each attempt's events into its tally and hands it
// over at every checkpoint (Attempt.Job); an attempt that ends keeps its
// tally, with how it ended, in its summary. The query joins them with the
// workflow's own clock and knowledge; it changes nothing, so it adds
// nothing to history.

func (r *taskRun) setupJobQuery() error {
	if err := workflow.SetQueryHandler(r.ctx, taskapi.QueryJob, func() (jobview.Job, error) {
		return r.job(), nil
	}); err != nil {
		return fmt.Errorf("register job query: %w", err)
	}
	return nil
}

// job is the task as jobview sees it: every attempt this workflow made,
// the one under way last.
func (r *taskRun) job() jobview.Job {
	d := r.st.Dispatch
	cur := r.st.Current
	in := jobview.JobInput{ID: d.TaskID, SpecID: d.PlanID, PlanID: cur.PlanName(), MaxAttempts: r.maxAttempts()}
	if d.ModelHint != nil {
		in.Model = *d.ModelHint
	}
	var updated time.Time
	for _, s := range r.st.Finished {
		in.Attempts = append(in.Attempts, jobview.AttemptInput{
			Number: s.Attempt, ID: s.PlanName, StartedAt: s.StartedAt, FinishedAt: s.EndedAt, Tally: s.Job})
		updated = later(updated, s.EndedAt)
	}
	// Once the task ended, its last attempt is among the finished ones.
	if cur.Stage != taskapi.StageDone {
		in.Attempts = append(in.Attempts, cur.jobInput())
		updated = later(later(updated, cur.StartedAt), cur.LastEventAt)
	}
	in.UpdatedAt = updated
	if len(in.Attempts) > 0 {
		in.CreatedAt = in.Attempts[0].StartedAt
	}
	if in.CreatedAt.IsZero() {
		// A run continued from the earliest state shape never recorded
		// when its attempt began.
		in.CreatedAt = workflow.GetInfo(r.ctx).WorkflowStartTime
	}
	return jobview.BuildJob(in)
}

// jobInput is the attempt under way as the job view needs it. Its outcome,
// once decided, shows before the task's status is written.
func (a Attempt) jobInput() jobview.AttemptInput {
	t := a.Job
	if t == nil && a.Brief.Brief.CurrentPhase != "" {
		// No tally yet (a workflow that delivers on the earlier path): the
		// brief still tells which phase runs.
		t = &jobview.Tally{Current: a.Brief.Brief.CurrentPhase}
	}
	if a.Stage == taskapi.StageFinish && a.Outcome != nil {
		t = a.endedTally(endedAs(*a.Outcome), a.Outcome.LastError)
	}
	return jobview.AttemptInput{Number: a.N, ID: a.PlanName(), StartedAt: a.StartedAt,
		Planning: a.Stage == taskapi.StagePrepare || a.Stage == taskapi.StageStart, Tally: t}
}

// endedTally is the attempt's tally with how it ended: ended as the
// attempt's summary words it, the outcome's phase (else the phase under
// way) and error type.
func (a Attempt) endedTally(ended, lastError string) *jobview.Tally {
	e := jobview.End{How: ended, Phase: a.Brief.Brief.CurrentPhase, Error: lastError}
	if o := a.Outcome; o != nil {
		e.ErrorType = o.ErrorType
		if o.PhaseID != "" {
			e.Phase = o.PhaseID
		}
	}
	return a.Job.WithEnd(e)
}

// endedAs words an outcome as finish() records it in the attempt's summary.
func endedAs(o mapping.Outcome) string {
	if mapping.IsAbort(o.LastError) {
		return taskapi.EndedAborted
	}
	return string(o.TaskStatus)
}

// maxAttempts is each phase's tries: the plan's, else what the dispatch
// asks for, else edda's default.
func (r *taskRun) maxAttempts() int {
	if p := r.st.Current.Plan; p != nil && p.Summary.MaxAttempts > 0 {
		return p.Summary.MaxAttempts
	}
	if c := r.st.Dispatch.ControlsSnapshot; c != nil && c.MaxReviewAttempts != nil {
		return *c.MaxReviewAttempts
	}
	return mapping.DefaultMaxAttempts
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
