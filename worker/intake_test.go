package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"

	"karvi-edda-temporal/api/intake"
)

// intakes answers the list of running intakes with these workflow ids,
// each described with its status and its first event's input.
func intakes(t *testing.T, c *mocks.Client, status map[string]enumspb.WorkflowExecutionStatus, boards map[string]string) {
	t.Helper()
	var execs []*workflowpb.WorkflowExecutionInfo
	for id, st := range status {
		execs = append(execs, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "r-" + id}})
		c.On("DescribeWorkflowExecution", mock.Anything, id, "").Return(&workflowservice.DescribeWorkflowExecutionResponse{
			WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "r-" + id}, Status: st}}, nil).Maybe()
		in, err := converter.GetDefaultDataConverter().ToPayloads(intakeapi.Input{BoardURL: boards[id]})
		require.NoError(t, err)
		it := &mocks.HistoryEventIterator{}
		it.On("HasNext").Return(true).Maybe()
		it.On("Next").Return(&historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: in}}}, nil).Maybe()
		c.On("GetWorkflowHistory", mock.Anything, id, "r-"+id, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT).Return(it).Maybe()
	}
	c.On("ListWorkflow", mock.Anything, mock.MatchedBy(func(r *workflowservice.ListWorkflowExecutionsRequest) bool {
		return r.GetNamespace() == "ns" && r.GetQuery() == "WorkflowType = 'KarviIntakeWorkflow' AND ExecutionStatus = 'Running'"
	})).Return(&workflowservice.ListWorkflowExecutionsResponse{Executions: execs}, nil)
}

// A second board's intake on a namespace that already follows one is
// refused with an error that names both boards and what to do: task
// workflow ids are karvi's task ids, which two boards share, so their
// intakes would run and cancel each other's tasks.
func TestSecondBoardOnANamespaceIsRefused(t *testing.T) {
	const a, b = "http://karvi-a:3461", "http://karvi-b:3461"
	idA := intakeapi.WorkflowID(a)
	c := &mocks.Client{}
	intakes(t, c, map[string]enumspb.WorkflowExecutionStatus{idA: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
		map[string]string{idA: a})
	err := oneBoardPerNamespace(context.Background(), c, nil, "ns", b)
	require.Error(t, err)
	for _, want := range []string{a, b, idA, "namespace ns", "karvi-task-<id>", "-namespace", "temporal workflow terminate"} {
		require.Contains(t, err.Error(), want)
	}

	// The same board's intake (a second worker of it) is no conflict.
	require.NoError(t, oneBoardPerNamespace(context.Background(), c, nil, "ns", a+"/"))
}

// The list of running workflows lags behind: an intake listed running
// that has closed since (a board given up, a test's intake terminated)
// is no conflict.
func TestAClosedIntakeIsNoConflict(t *testing.T) {
	const a, b = "http://karvi-a:3461", "http://karvi-b:3461"
	c := &mocks.Client{}
	intakes(t, c, map[string]enumspb.WorkflowExecutionStatus{intakeapi.WorkflowID(a): enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED},
		map[string]string{intakeapi.WorkflowID(a): a})
	require.NoError(t, oneBoardPerNamespace(context.Background(), c, nil, "ns", b))
}
