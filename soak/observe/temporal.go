package observe

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/soak"
)

// Workflows is what the soak asks the task workflows. The Temporal
// implementation is TemporalWorkflows; tests give their own.
type Workflows interface {
	// Status is the task's status query as a sample; found is false when
	// the task has no workflow (yet).
	Status(ctx context.Context, task string) (s soak.TaskSample, found bool, err error)
	// Cost is the task's cost query: what it spent and its budget (nil
	// for none).
	Cost(ctx context.Context, task string) (spent float64, budget *soak.Budget, err error)
	// Final is how the task's workflow chain stands at the end, its job
	// view, and the working directory of each attempt the view lists (by
	// plan name). A task without a workflow gives nil, nil.
	Final(ctx context.Context, task string) (*soak.WorkflowObs, *soak.JobObs, map[string]string, error)
}

// TemporalWorkflows asks the task workflows through a Temporal client.
func TemporalWorkflows(c client.Client) Workflows { return temporalWorkflows{c} }

type temporalWorkflows struct{ c client.Client }

func notFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func (w temporalWorkflows) query(ctx context.Context, task, name string, into any) (bool, error) {
	err := taskapi.Tasks{Client: w.c}.Query(ctx, task, "", name, into)
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("task %s: query %s: %w", task, name, err)
	}
	return true, nil
}

func (w temporalWorkflows) Status(ctx context.Context, task string) (soak.TaskSample, bool, error) {
	var st taskapi.Status
	found, err := w.query(ctx, task, taskapi.QueryStatus, &st)
	if !found || err != nil {
		return soak.TaskSample{}, found, err
	}
	return sampleOf(task, st), true, nil
}

// sampleOf turns a status query's answer into a sample.
func sampleOf(task string, st taskapi.Status) soak.TaskSample {
	s := soak.TaskSample{Task: task, Open: st.Stage != taskapi.StageDone, Stage: string(st.Stage),
		Attempt: st.Attempt, PlanName: st.PlanName, Host: st.Host, Phase: st.CurrentPhase, CostUSD: st.CostUSD}
	if p := st.Pause; p != nil {
		s.Pause = &soak.Pause{Reason: p.Reason, Since: p.Since, Until: p.Until, ResetAt: p.ResetAt,
			Count: p.Count, Account: p.Account, By: p.By, Budget: p.Budget}
	}
	return s
}

func (w temporalWorkflows) Cost(ctx context.Context, task string) (float64, *soak.Budget, error) {
	var c taskapi.Cost
	found, err := w.query(ctx, task, taskapi.QueryCost, &c)
	if !found || err != nil {
		return 0, nil, err
	}
	var b *soak.Budget
	if c.Budget != nil {
		b = &soak.Budget{LimitUSD: c.Budget.LimitUSD, Action: string(c.Budget.Action)}
	}
	return c.Summary.TotalUSD, b, nil
}

func (w temporalWorkflows) Final(ctx context.Context, task string) (*soak.WorkflowObs, *soak.JobObs, map[string]string, error) {
	tasks := taskapi.Tasks{Client: w.c}
	desc, err := tasks.Describe(ctx, task, "")
	if notFound(err) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("task %s: describe: %w", task, err)
	}
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	wo := &soak.WorkflowObs{
		Closed:      status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		CloseStatus: strings.ToLower(strings.TrimPrefix(status.String(), "WorkflowExecutionStatus")),
	}
	if !wo.Closed {
		wo.CloseStatus = ""
	}
	var errs []error
	var st taskapi.Status
	if _, err := w.query(ctx, task, taskapi.QueryStatus, &st); err != nil {
		errs = append(errs, err)
	} else {
		wo.Stage, wo.Attempt, wo.PlanName, wo.TaskStatus = string(st.Stage), st.Attempt, st.PlanName, string(st.TaskStatus)
		if st.Outcome != nil {
			wo.Outcome, wo.OutcomeError = string(st.Outcome.TaskStatus), st.Outcome.LastError
		}
		wo.Attempts = attemptsOf(st.Attempts)
	}
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		if res, err := tasks.Result(ctx, task, ""); err != nil {
			errs = append(errs, fmt.Errorf("task %s: result: %w", task, err))
		} else {
			wo.Attempt, wo.PlanName = res.Attempt, res.PlanName
			wo.Outcome, wo.OutcomeError = string(res.Outcome.TaskStatus), res.Outcome.LastError
			if len(res.Attempts) > 0 {
				wo.Attempts = attemptsOf(res.Attempts)
			}
		}
	}
	if spent, b, err := w.Cost(ctx, task); err != nil {
		errs = append(errs, err)
	} else {
		wo.CostUSD, wo.Budget = spent, b
	}
	if n, err := w.closes(ctx, taskapi.WorkflowID(task)); err != nil {
		errs = append(errs, err)
	} else {
		wo.Closes = n
	}
	var job jobview.Job
	var jo *soak.JobObs
	cwds := map[string]string{}
	if _, err := w.query(ctx, task, taskapi.QueryJob, &job); err != nil {
		errs = append(errs, err)
	} else {
		jo = &soak.JobObs{TotalUSD: job.Metrics.Cost.TotalUSD}
		for _, a := range job.Attempts {
			jo.Attempts = append(jo.Attempts, a.ID)
			if a.WorktreePath != "" {
				cwds[a.ID] = a.WorktreePath
			}
		}
		for _, s := range job.Metrics.StepMetrics {
			jo.Steps = append(jo.Steps, soak.JobStep{Phase: s.StepID, Tries: s.Tries, CostUSD: s.CostUSD})
		}
	}
	return wo, jo, cwds, errors.Join(errs...)
}

func attemptsOf(as []taskapi.AttemptSummary) []soak.AttemptSummary {
	out := make([]soak.AttemptSummary, 0, len(as))
	for _, a := range as {
		out = append(out, soak.AttemptSummary{Attempt: a.Attempt, PlanName: a.PlanName, Ended: a.Ended,
			LastError: a.LastError, StartedAt: a.StartedAt, EndedAt: a.EndedAt, ConductorLeft: a.ConductorLeft})
	}
	return out
}

// closes counts the workflow id's executions that closed other than by
// continuing as new: each is one end of the task.
func (w temporalWorkflows) closes(ctx context.Context, id string) (int, error) {
	n := 0
	var next []byte
	for {
		page, err := w.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = '%s'", id), NextPageToken: next})
		if err != nil {
			return 0, fmt.Errorf("list executions of %s: %w", id, err)
		}
		for _, e := range page.GetExecutions() {
			switch e.GetStatus() {
			case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
			default:
				n++
			}
		}
		if next = page.GetNextPageToken(); len(next) == 0 {
			return n, nil
		}
	}
}
