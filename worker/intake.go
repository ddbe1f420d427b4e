package main

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"karvi-edda-temporal/api/intake"
)

// oneBoardPerNamespace refuses to follow board when the intake of another
// board already runs on the namespace. Task and run workflows are named
// by karvi's task and project ids (karvi-task-<id>), which two boards
// share (every board has a T1), so a second board's tasks would find the
// first board's workflows; the intakes tell their own workflows from the
// others' and block such a task rather than touch the other board's, but
// then the second board's tasks mostly do not run. One board per
// namespace keeps every board's tasks running.
//
// The list of running workflows lags behind a little: an intake started
// at the same moment can pass unseen (the marks then keep the boards
// apart), and one listed that has closed since is no conflict, which a
// describe (not lagging) tells. dc decodes the other intake's input, to
// name its board; nil is the SDK's default converter.
func oneBoardPerNamespace(ctx context.Context, cl client.Client, dc converter.DataConverter, namespace, board string) error {
	self := intakeapi.WorkflowID(board)
	resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace,
		Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", intakeapi.WorkflowName)})
	if err != nil {
		return fmt.Errorf("list the karvi intakes running on namespace %s: %w", namespace, err)
	}
	for _, ex := range resp.GetExecutions() {
		id := ex.GetExecution().GetWorkflowId()
		if id == self {
			continue
		}
		desc, err := intakeapi.Intakes{Client: cl}.Describe(ctx, id)
		if err != nil {
			return fmt.Errorf("describe the karvi intake %s running on namespace %s: %w", id, namespace, err)
		}
		info := desc.GetWorkflowExecutionInfo()
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			continue
		}
		other := boardOf(ctx, cl, dc, id, info.GetExecution().GetRunId())
		return fmt.Errorf("the karvi intake of board %s (workflow %s) already runs on namespace %s, and one namespace follows one board: "+
			"task workflows are named by karvi's task ids (karvi-task-<id>), which two boards share, so the intake of %s would find the other board's workflows under its tasks' ids. "+
			"Run the worker of %s on a namespace of its own (-namespace), or, if board %s is gone or is this same board at another address, "+
			"stop its intake first: temporal workflow terminate --namespace %s --workflow-id %s",
			other, id, namespace, board, board, other, namespace, id)
	}
	return nil
}

// boardOf reads the board an intake follows from its run's input; the
// workflow id (host, port and path of the board) when it cannot.
func boardOf(ctx context.Context, cl client.Client, dc converter.DataConverter, id, runID string) string {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	it := cl.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return id
	}
	ev, err := it.Next()
	if err != nil {
		return id
	}
	var in intakeapi.Input
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil || dc.FromPayloads(attrs.GetInput(), &in) != nil || in.BoardURL == "" {
		return id
	}
	return in.BoardURL
}
