package intakeact

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/intake"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
)

// A task of a run cancelled on the board is aborted like a task on its
// own: its workflow (the run's child, of the task's own id) gets the
// abort signal, and the run treats it as any aborted task.
func TestApplyAbortsATaskOfARun(t *testing.T) {
	c := &mocks.Client{}
	c.On("SignalWorkflow", mock.Anything, "karvi-task-R1", "", taskapi.SignalAbort,
		taskapi.AbortSignal{Reason: "cancelled on the board"}).Return(nil).Once()
	a := &Activities{Temporal: c}
	res, err := a.Apply(context.Background(), intakeapi.ApplyInput{Action: intake.Action{
		Kind: intake.KindAbort, TaskID: "R1", WorkflowID: "karvi-run-proj-1", Reason: "cancelled on the board"}})
	require.NoError(t, err)
	require.Equal(t, "sent abort to karvi-task-R1 (a task of run karvi-run-proj-1)", res.Result)
	c.AssertExpectations(t)
}

// A task of a run the run has not started yet: nothing to signal now; the
// answer says the abort waits for the run to start it.
func TestApplyAbortOfAnUnstartedRunTask(t *testing.T) {
	c := &mocks.Client{}
	c.On("SignalWorkflow", mock.Anything, "karvi-task-R2", "", taskapi.SignalAbort, mock.Anything).
		Return(serviceerror.NewNotFound("workflow not found")).Once()
	a := &Activities{Temporal: c}
	res, err := a.Apply(context.Background(), intakeapi.ApplyInput{Action: intake.Action{
		Kind: intake.KindAbort, TaskID: "R2", WorkflowID: "karvi-run-proj-1", Reason: "cancelled on the board"}})
	require.NoError(t, err)
	require.Contains(t, res.Result, "has not started yet: aborted when the run starts it")
}

// A run's task cancelled before the run started it is aborted by the
// follower once the run has started its workflow; a task on its own is
// not signalled again.
func TestFollowerAbortsARunTaskOnceItStarted(t *testing.T) {
	c := &mocks.Client{}
	running := &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}}
	c.On("DescribeWorkflowExecution", mock.Anything, "karvi-task-R3", "").Return(running, nil)
	c.On("DescribeWorkflowExecution", mock.Anything, "karvi-task-S1", "").Return(running, nil)
	c.On("SignalWorkflow", mock.Anything, "karvi-task-R3", "", taskapi.SignalAbort, mock.Anything).Return(nil).Once()
	a := &Activities{Temporal: c}
	ended, err := a.ended(context.Background(), intake.State{Claims: []intake.Claim{
		{TaskID: "R3", RunWorkflowID: "karvi-run-p", Phase: intake.PhaseRunning, Attempt: 1, Aborted: true},
		{TaskID: "S1", Phase: intake.PhaseRunning, Attempt: 1, Aborted: true},
	}}, "")
	require.NoError(t, err)
	require.Empty(t, ended)
	c.AssertExpectations(t)
}

// runOf answers the describe of a run workflow with the given status and
// its status query with a document in which task holds state.
func runOf(c *mocks.Client, runID string, status enumspb.WorkflowExecutionStatus, task string, state runstatus.TaskState) {
	c.On("DescribeWorkflowExecution", mock.Anything, runID, "").Return(&workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: status}}, nil)
	v := &mocks.Value{}
	v.On("Get", mock.Anything).Run(func(args mock.Arguments) {
		*args.Get(0).(*runstatus.Status) = runstatus.Status{Tasks: map[string]*runstatus.Task{task: {Status: state}}}
	}).Return(nil)
	c.On("QueryWorkflow", mock.Anything, runID, "", runapi.QueryStatus).Return(v, nil).Maybe()
}

func redispatchOfRunTask(task string) intakeapi.ApplyInput {
	d := mapping.DispatchPlan{TaskID: task}
	return intakeapi.ApplyInput{TaskQueue: "q", Action: intake.Action{
		Kind: intake.KindRedispatch, TaskID: task, WorkflowID: "karvi-run-proj-1", Attempt: 2,
		Dispatch: &d, Reason: "sent back by the board"}}
}

// A run's task that failed in a run still running is sent back: the run
// is asked to retry it (its status.json follows, its dependents run
// after it), as `starter run retry` would.
func TestApplyRedispatchRetriesAFailedTaskInItsRun(t *testing.T) {
	c := &mocks.Client{}
	runOf(c, "karvi-run-proj-1", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "R1", runstatus.TaskFailed)
	h := &mocks.WorkflowUpdateHandle{}
	h.On("Get", mock.Anything, nil).Return(nil)
	c.On("UpdateWorkflow", mock.Anything, mock.MatchedBy(func(o client.UpdateWorkflowOptions) bool {
		return o.WorkflowID == "karvi-run-proj-1" && o.UpdateName == runapi.UpdateRetry &&
			len(o.Args) == 1 && o.Args[0] == runapi.TaskRequest{Task: "R1", Reason: "sent back by the board"}
	})).Return(h, nil).Once()
	a := &Activities{Temporal: c}
	res, err := a.Apply(context.Background(), redispatchOfRunTask("R1"))
	require.NoError(t, err)
	require.Equal(t, "retried task R1 in run karvi-run-proj-1", res.Result)
	c.AssertExpectations(t)
}

// A run's task that is queued or running in its run again (the retry was
// already sent) is left to the run: nothing is sent twice.
func TestApplyRedispatchLeavesARunTaskItsRunRunsAgain(t *testing.T) {
	c := &mocks.Client{}
	runOf(c, "karvi-run-proj-1", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "R1", runstatus.TaskQueued)
	a := &Activities{Temporal: c}
	res, err := a.Apply(context.Background(), redispatchOfRunTask("R1"))
	require.NoError(t, err)
	require.Equal(t, "not redispatched: task R1 is queued in run karvi-run-proj-1, which runs it", res.Result)
	c.AssertExpectations(t)
}

// A run's task sent back after its run ended, or after it completed in
// its run, runs again on its own with the next attempt; the answer says
// it runs outside the run.
func TestApplyRedispatchStartsARunTaskOnItsOwn(t *testing.T) {
	for name, run := range map[string]struct {
		status enumspb.WorkflowExecutionStatus
		state  runstatus.TaskState
	}{
		"run ended":          {enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, runstatus.TaskFailed},
		"task done in a run": {enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, runstatus.TaskDone},
	} {
		t.Run(name, func(t *testing.T) {
			c := &mocks.Client{}
			runOf(c, "karvi-run-proj-1", run.status, "R1", run.state)
			c.On("DescribeWorkflowExecution", mock.Anything, "karvi-task-R1", "").Return(&workflowservice.DescribeWorkflowExecutionResponse{
				WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}}, nil)
			prev := &mocks.WorkflowRun{}
			prev.On("Get", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
				*args.Get(1).(*taskapi.Result) = taskapi.Result{Attempt: 1}
			}).Return(nil)
			c.On("GetWorkflow", mock.Anything, "karvi-task-R1", "").Return(prev)
			started := &mocks.WorkflowRun{}
			started.On("GetRunID").Return("run-2")
			c.On("ExecuteWorkflow", mock.Anything, mock.MatchedBy(func(o client.StartWorkflowOptions) bool {
				return o.ID == "karvi-task-R1" && o.WorkflowIDReusePolicy == enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
			}), taskapi.TaskWorkflowName, mock.MatchedBy(func(in taskapi.TaskInput) bool { return in.Attempt == 2 })).
				Return(started, nil).Once()
			a := &Activities{Temporal: c}
			res, err := a.Apply(context.Background(), redispatchOfRunTask("R1"))
			require.NoError(t, err)
			require.Equal(t, "started karvi-task-R1 run run-2 (attempt 2), outside run karvi-run-proj-1: "+
				"the run's status.json is not changed and its dependents do not run again", res.Result)
			c.AssertExpectations(t)
		})
	}
}

// A task sent back after its workflow closed is followed from its next
// workflow on: until that starts, the closed one (the run id the claim
// keeps from its end) is not reported ended again, for a task of a run
// (whose children carry no intake memo) as for a task on its own.
func TestFollowerDoesNotReportTheEndedWorkflowOfASentBackTask(t *testing.T) {
	c := &mocks.Client{}
	closed := func(runID string) *workflowservice.DescribeWorkflowExecutionResponse {
		return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{RunId: runID}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_FAILED}}
	}
	c.On("DescribeWorkflowExecution", mock.Anything, "karvi-task-R4", "").Return(closed("old-r4"), nil)
	c.On("DescribeWorkflowExecution", mock.Anything, "karvi-task-R5", "").Return(closed("new-r5"), nil)
	a := &Activities{Temporal: c}
	ended, err := a.ended(context.Background(), intake.State{Claims: []intake.Claim{
		{TaskID: "R4", RunWorkflowID: "karvi-run-p", Phase: intake.PhaseRunning, Attempt: 2, EndedRunID: "old-r4"},
		{TaskID: "R5", RunWorkflowID: "karvi-run-p", Phase: intake.PhaseRunning, Attempt: 2, EndedRunID: "old-r5"},
	}}, "")
	require.NoError(t, err)
	require.Equal(t, []intakeapi.Ended{{TaskID: "R5", How: "failed", RunID: "new-r5"}}, ended,
		"R4's only workflow is the one that ended before; R5's new one ended")
}

// The tasks and runs an intake starts carry its time scale, else the
// worker's; at real time they carry no tuning at all.
func TestApplyStartsAtTheIntakesTimeScale(t *testing.T) {
	d := &mapping.DispatchPlan{TaskID: "T1"}
	for _, tc := range []struct {
		name   string
		intake float64
		worker float64
		want   *taskapi.Tuning
	}{
		{"real time", 0, 0, nil},
		{"the intake's", 60, 0, &taskapi.Tuning{TimeScale: 60}},
		{"the worker's", 0, 30, &taskapi.Tuning{TimeScale: 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &mocks.Client{}
			started := &mocks.WorkflowRun{}
			started.On("GetRunID").Return("run-1")
			c.On("ExecuteWorkflow", mock.Anything, mock.Anything, taskapi.TaskWorkflowName,
				mock.MatchedBy(func(in taskapi.TaskInput) bool { return assertTuning(t, tc.want, in.Tuning) })).Return(started, nil).Once()
			c.On("ExecuteWorkflow", mock.Anything, mock.Anything, runapi.RunWorkflowName,
				mock.MatchedBy(func(in runapi.RunInput) bool { return assertTuning(t, tc.want, in.Tuning) })).Return(started, nil).Once()
			a := &Activities{Temporal: c, Scale: timescale.Scale(tc.worker)}
			_, err := a.Apply(context.Background(), intakeapi.ApplyInput{TaskQueue: "q", TimeScale: tc.intake,
				Action: intake.Action{Kind: intake.KindStart, TaskID: "T1", WorkflowID: "karvi-task-T1", Dispatch: d}})
			require.NoError(t, err)
			_, err = a.Apply(context.Background(), intakeapi.ApplyInput{TaskQueue: "q", TimeScale: tc.intake,
				Action: intake.Action{Kind: intake.KindStartRun, WorkflowID: "karvi-run-p-1",
					RunFile: []byte(`{"title":"P","slug":"p-1","tasks":[{"id":"a","title":"A"}]}`)}})
			require.NoError(t, err)
			c.AssertExpectations(t)
		})
	}
}

func assertTuning(t *testing.T, want, got *taskapi.Tuning) bool {
	t.Helper()
	return assert.Equal(t, want, got)
}
