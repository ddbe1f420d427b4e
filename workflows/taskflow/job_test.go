package taskflow

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/mapping"
)

// fakeTally is the fake delivery's job view: the checkpoint's tally with
// the polled events folded in, as the real tail does.
func fakeTally(req taskact.DeliverRequest, evs []mapping.Event) *jobview.Tally {
	t := req.Job.Clone()
	if t == nil {
		t = jobview.NewTally(jobview.Seed{PhaseIDs: req.Plan.Summary.PhaseIDs, Worktree: req.Plan.Cwd})
	}
	for _, ev := range evs {
		t.Observe(ev)
	}
	return t
}

// The job query across a redispatch: while the first attempt runs it is
// executing that attempt's phase; the redispatch ends it as an execution
// failure and the second attempt runs; once that completes the job has
// succeeded at attempt 2, with both attempts and their metrics.
func TestJobQueryAcrossARedispatch(t *testing.T) {
	env := newEnv(t)
	all := loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")
	f := &fakeConductor{t: t, events: all[:2], perBatch: 1}
	f.register(env)
	query := func() jobview.Job {
		t.Helper()
		v, err := env.QueryWorkflow(taskapi.QueryJob)
		require.NoError(t, err)
		var j jobview.Job
		require.NoError(t, v.Get(&j))
		return j
	}
	var during, second jobview.Job
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.hang = true // after a second poll delivered phase_start
		f.mu.Unlock()
	}, 2500*time.Millisecond)
	env.RegisterDelayedCallback(func() { during = query() }, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: "try again"})
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		// Once the first attempt was stopped and drained, the second one's
		// conductor writes the whole plan.
		f.mu.Lock()
		f.hang = false
		f.events = all
		f.mu.Unlock()
	}, 12*time.Second)
	env.RegisterDelayedCallback(func() { second = query() }, 16*time.Second)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())

	require.Equal(t, jobview.Executing(1, "implement"), during.State)
	require.Len(t, during.Attempts, 1)
	require.Equal(t, jobview.ResultInProgress, during.Attempts[0].Result.Status)
	require.Nil(t, during.Attempts[0].FinishedAt)

	require.Equal(t, jobview.StateExecuting, second.State.Status)
	require.Equal(t, 2, second.State.Attempt)
	require.Len(t, second.Attempts, 2)

	job := query()
	require.Equal(t, "T5", job.ID)
	require.Equal(t, "disp_001", job.SpecID)
	require.Equal(t, mapping.PlanName("T5", 2), job.PlanID)
	require.Equal(t, 3, job.MaxAttempts)
	require.Equal(t, jobview.Succeeded(2, ""), job.State)
	require.Len(t, job.Attempts, 2)

	first, last := job.Attempts[0], job.Attempts[1]
	require.Equal(t, mapping.PlanName("T5", 1), first.ID)
	require.Equal(t, jobview.AttemptResult{Status: jobview.ResultExecutionFailed, Step: "implement",
		Error: "Redispatched before the attempt finished"}, first.Result)
	require.NotNil(t, first.FinishedAt)
	require.Equal(t, "/work/tasks/x", first.WorktreePath)
	require.Equal(t, jobview.ResultSucceeded, last.Result.Status)
	require.True(t, last.Verdict.Passed)
	require.Equal(t, "3 passed, 0 failed, 3 total in 0ms", last.Verdict.Summary())
	require.Equal(t, first.StartedAt, job.CreatedAt)
	require.True(t, !last.StartedAt.Before(*first.FinishedAt), "attempt 2 began after attempt 1 ended")

	m := job.Metrics
	require.Equal(t, 1, m.RetryCount, "the redispatch")
	require.Equal(t, 1.45, m.Cost.TotalUSD)
	require.Equal(t, map[string]float64{jobview.UnknownModel: 1.45}, m.Cost.ByModel)
	require.Equal(t, "implement", m.StepMetrics[0].StepID)
	require.Equal(t, 2, m.StepMetrics[0].Tries, "one try in each attempt")
	require.Equal(t, 119*time.Second, m.StepMetrics[0].Duration.Std())
	require.Equal(t, last.FinishedAt.Sub(job.CreatedAt), m.TotalTime.Std())

	// The status query's attempt summaries carry the same record.
	v, err := env.QueryWorkflow(taskapi.QueryStatus)
	require.NoError(t, err)
	var st taskapi.Status
	require.NoError(t, v.Get(&st))
	require.Len(t, st.Attempts, 2)
	require.Equal(t, &jobview.End{How: taskapi.EndedRedispatched, Phase: "implement"}, st.Attempts[0].Job.End)

	// What a client prints: snake_case, the state tagged by status.
	data, err := json.Marshal(job)
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(data, &raw))
	require.Equal(t, map[string]any{"status": "succeeded", "attempt": 2.0, "diff_path": ""}, raw["state"])
	require.Contains(t, raw, "max_attempts")
}

// An attempt whose conductor could not start ends as an execution failure
// with the crash wording; the job failed.
func TestJobQueryWhenTheConductorCannotStart(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t}
	env.RegisterActivity(acts)
	env.OnActivity(acts.ClaimHost, mock.Anything, mock.Anything).Return(taskact.ClaimHostResult{}, nil)
	env.OnActivity(acts.StartAttempt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.StartAttemptRequest) (taskact.StartAttemptResult, error) {
			info, err := f.prepare(taskact.PrepareRequest{Dispatch: req.Dispatch, Attempt: req.Attempt})
			return taskact.StartAttemptResult{Plan: info, StartError: "exec: edda: not found"}, err
		})
	env.OnActivity(acts.SetTaskStatus, mock.Anything, mock.Anything).Return(nil)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	v, err := env.QueryWorkflow(taskapi.QueryJob)
	require.NoError(t, err)
	var job jobview.Job
	require.NoError(t, v.Get(&job))
	require.Equal(t, jobview.StateFailed, job.State.Status)
	require.Equal(t, 1, job.State.Attempts)
	require.Contains(t, job.State.LastError, "conductor could not start: exec: edda: not found")
	require.Equal(t, jobview.ResultExecutionFailed, job.Attempts[0].Result.Status)
	require.Empty(t, job.Attempts[0].Verdict.TestResults)
}
