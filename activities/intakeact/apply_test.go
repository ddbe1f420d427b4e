package intakeact

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/mocks"

	"karvi-edda-temporal/intake"
	"karvi-edda-temporal/workflows/intakeapi"
	"karvi-edda-temporal/workflows/taskapi"
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
	}})
	require.NoError(t, err)
	require.Empty(t, ended)
	c.AssertExpectations(t)
}
