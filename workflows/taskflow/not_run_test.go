package taskflow

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// A start that finds the task cancelled on the board (the cancel came
// after the intake started the workflow, before the attempt's first status
// write) reports the attempt not run: the workflow ends cleanly with an
// outcome that says so, starts and stops nothing, and its one status write
// (blocked, which the sink skips for a cancelled task) is its last. The
// intake's abort for the same cancel, come meanwhile, has nothing left to
// do.
func TestAttemptNotRunForABoardCancelEndsCleanly(t *testing.T) {
	env, statuses := notRunEnv(t)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalAbort, taskapi.AbortSignal{Reason: "cancelled on the board"})
	}, 500*time.Millisecond)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "the workflow ends cleanly")
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))

	want := "Plan not run: " + notRunWhy
	require.Equal(t, mapping.Outcome{PlanStatus: mapping.PlanAborted, TaskStatus: mapping.TaskBlocked,
		DispatchState: mapping.DispatchFailed, LastError: want, BlockerReason: want, Code: 1,
		ErrorType: mapping.ErrNotRun}, res.Outcome)
	require.Len(t, res.Attempts, 1)
	require.Equal(t, taskapi.EndedAborted, res.Attempts[0].Ended)
	require.Equal(t, mapping.PlanName("T5", 1), res.PlanName)
	require.Equal(t, mapping.PlanName("T5", 1), res.Brief.Plan.Name, "the brief is the attempt's skeleton")
	require.Zero(t, res.Brief.CompletedPhases)
	require.Equal(t, []string{"blocked"}, statusNames(*statuses), "the one status write is the last")
	require.Equal(t, want, (*statuses)[0].LastError)

	v, err := env.QueryWorkflow(taskapi.QueryStatus)
	require.NoError(t, err)
	var st taskapi.Status
	require.NoError(t, v.Get(&st))
	require.Equal(t, 1, st.SignalsReceived)
	require.Equal(t, 1, st.SignalsIgnored, "the abort had nothing left to stop")
	require.Zero(t, st.ConductorPID)
}

// A workflow that predates the not-run outcome (its history has no marker
// for it) reads such a start as a conductor that could not start, as it
// did, and still ends cleanly.
func TestAttemptNotRunBeforeTheChangeReadsAsAStartError(t *testing.T) {
	env, statuses := notRunEnv(t)
	env.OnGetVersion(versionNotRun, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, mapping.CrashOutcome("", -1, "conductor could not start: "+notRunWhy), res.Outcome)
	require.Equal(t, []string{"blocked"}, statusNames(*statuses))
}

const notRunWhy = "the task was cancelled on the board before it started"

// notRunEnv is a task workflow whose start reports the attempt not run;
// the status writes it makes are kept in the slice returned.
func notRunEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *[]taskact.TaskStatusUpdate) {
	t.Helper()
	env := newEnv(t)
	f := &fakeConductor{t: t}
	env.RegisterActivity(acts)
	env.OnActivity(acts.ClaimHost, mock.Anything, mock.Anything).Return(taskact.ClaimHostResult{Host: "h1"}, nil)
	env.OnActivity(acts.StartAttempt, mock.Anything, mock.Anything).After(time.Second).Return(
		func(_ context.Context, req taskact.StartAttemptRequest) (taskact.StartAttemptResult, error) {
			info, err := f.prepare(taskact.PrepareRequest{Dispatch: req.Dispatch, Attempt: req.Attempt})
			return taskact.StartAttemptResult{Plan: info, Host: "h1", NotRun: notRunWhy, StartError: notRunWhy}, err
		})
	env.OnActivity(acts.DeliverEvents, mock.Anything, mock.Anything).Return(
		func(context.Context, taskact.DeliverRequest) (taskact.DeliverResult, error) {
			t.Error("a delivery of an attempt not run")
			return taskact.DeliverResult{}, nil
		})
	env.OnActivity(acts.AbortConductor, mock.Anything, mock.Anything).Return(
		func(context.Context, taskact.AbortRequest) error {
			t.Error("a stop of a conductor never started")
			return nil
		})
	var statuses []taskact.TaskStatusUpdate
	env.OnActivity(acts.SetTaskStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.StatusRequest) error {
			statuses = append(statuses, req.Update)
			return nil
		})
	return env, &statuses
}
