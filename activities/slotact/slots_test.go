package slotact

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/slots"
	"karvi-edda-temporal/workflows/slotflow/slotapi"
)

// fakeSlotClient answers as the server would: an update's outcome (or its
// refusal), and a description per workflow id.
type fakeSlotClient struct {
	start     client.StartWorkflowOptions
	startArgs []any
	update    client.UpdateWorkflowOptions
	answer    slots.Answer
	updateErr error // what the update's outcome is (a validator refusal)
	described map[string]*workflowservice.DescribeWorkflowExecutionResponse
	describe  map[string]error
}

type startOp struct {
	client.WithStartWorkflowOperation
}

func (f *fakeSlotClient) NewWithStartWorkflowOperation(o client.StartWorkflowOptions, _ any, args ...any) client.WithStartWorkflowOperation {
	f.start, f.startArgs = o, args
	return startOp{}
}

func (f *fakeSlotClient) UpdateWithStartWorkflow(_ context.Context, o client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.update = o.UpdateOptions
	return fakeHandle{f}, nil
}

func (f *fakeSlotClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if err := f.describe[id]; err != nil {
		return nil, err
	}
	return f.described[id], nil
}

type fakeHandle struct{ f *fakeSlotClient }

func (h fakeHandle) WorkflowID() string { return h.f.update.WorkflowID }
func (h fakeHandle) RunID() string      { return "run" }
func (h fakeHandle) UpdateID() string   { return h.f.update.UpdateID }
func (h fakeHandle) Get(_ context.Context, v any) error {
	if h.f.updateErr != nil {
		return h.f.updateErr
	}
	data, _ := json.Marshal(h.f.answer)
	return json.Unmarshal(data, v)
}

func slotActivityEnv(f *fakeSlotClient) *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(&Activities{Temporal: f})
	return env
}

func TestAcquireSlotStartsThePoolOnDemandAndAsksOnce(t *testing.T) {
	f := &fakeSlotClient{answer: slots.Answer{State: slots.Queued, Position: 3}}
	env := slotActivityEnv(f)
	req := slots.Request{Key: slots.Key{Task: "T5", Attempt: 2}, Run: "r", Owner: slots.Owner{WorkflowID: "karvi-task-T5"}}
	v, err := env.ExecuteActivity((&Activities{}).AcquireSlot, AcquireSlotRequest{Pool: "agents", Request: req})
	require.NoError(t, err)
	var ans slots.Answer
	require.NoError(t, v.Get(&ans))
	require.Equal(t, f.answer, ans)

	require.Equal(t, "karvi-slots-agents", f.start.ID)
	require.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, f.start.WorkflowIDConflictPolicy)
	require.NotEmpty(t, f.start.TaskQueue, "the pool runs on the acquiring worker's queue")
	require.Equal(t, []any{slotapi.PoolInput{Pool: "agents"}}, f.startArgs)
	require.Equal(t, "karvi-slots-agents", f.update.WorkflowID)
	require.Equal(t, slotapi.UpdateAcquire, f.update.UpdateName)
	require.Equal(t, "acquire/T5/2", f.update.UpdateID, "one update id per key: a retry is answered by the first")
	require.Equal(t, client.WorkflowUpdateStageCompleted, f.update.WaitForStage)
	require.Equal(t, []any{req}, f.update.Args)
}

func TestAcquireSlotRefusalsAreFinal(t *testing.T) {
	f := &fakeSlotClient{updateErr: temporal.NewApplicationError("key: attempt 0 must be at least 1", "")}
	env := slotActivityEnv(f)
	_, err := env.ExecuteActivity((&Activities{}).AcquireSlot, AcquireSlotRequest{Pool: "agents"})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrBadSlotRequest, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, err.Error(), "attempt 0 must be at least 1")

	_, err = env.ExecuteActivity((&Activities{}).AcquireSlot, AcquireSlotRequest{Pool: "no such/pool"})
	require.True(t, errors.As(err, &app))
	require.Equal(t, ErrBadSlotRequest, app.Type())
}

func described(status enumspb.WorkflowExecutionStatus, firstRun string) *workflowservice.DescribeWorkflowExecutionResponse {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: status, FirstRunId: firstRun}}
}

func TestCheckHoldersSortsHoldersByTheirWorkflows(t *testing.T) {
	f := &fakeSlotClient{
		described: map[string]*workflowservice.DescribeWorkflowExecutionResponse{
			"karvi-task-run":  described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "r1"),
			"karvi-task-term": described(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, "r2"),
			"karvi-task-done": described(enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, "r3"),
			"karvi-task-new":  described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "other"),
		},
		describe: map[string]error{
			"karvi-task-gone":  serviceerror.NewNotFound("workflow not found"),
			"karvi-task-flaky": serviceerror.NewUnavailable("try again"),
		},
	}
	env := slotActivityEnv(f)
	holder := func(task, firstRun string) slots.Holder {
		return slots.Holder{Key: slots.Key{Task: task, Attempt: 1}, Owner: slots.Owner{WorkflowID: "karvi-task-" + task, FirstRunID: firstRun}}
	}
	v, err := env.ExecuteActivity((&Activities{}).CheckHolders, CheckHoldersRequest{Pool: "agents", Holders: []slots.Holder{
		holder("run", "r1"), holder("term", "r2"), holder("done", "r3"), holder("new", "r4"),
		holder("gone", "r5"), holder("flaky", "r6"), {Key: slots.Key{Task: "nobody", Attempt: 1}},
	}})
	require.NoError(t, err)
	var res CheckHoldersResult
	require.NoError(t, v.Get(&res))
	require.Equal(t, []slots.Key{{Task: "run", Attempt: 1}}, res.Running)
	require.Equal(t, 2, res.Unknown, "a failed description and a holder without a workflow vouch for nothing")
	var why []string
	for _, c := range res.Closed {
		why = append(why, c.Key.Task+": "+c.Why)
	}
	require.Equal(t, []string{
		"term: workflow karvi-task-term was terminated without releasing its slot",
		"done: workflow karvi-task-done completed without releasing its slot",
		"new: workflow karvi-task-new is another run chain now (first run other, the holder's r4)",
		"gone: workflow karvi-task-gone not found",
	}, why)
}
