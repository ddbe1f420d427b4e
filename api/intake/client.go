package intakeapi

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Intakes is every Temporal call a client makes on a board's intake
// workflow. Errors are the SDK's, unwrapped.
type Intakes struct {
	Client client.Client
	// TaskQueue is where Start runs an intake.
	TaskQueue string
}

// Start starts the intake of in.BoardURL, or answers the one already
// running: there is one per board, whichever worker started it.
func (x Intakes) Start(ctx context.Context, in Input) (client.WorkflowRun, error) {
	return x.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       WorkflowID(in.BoardURL),
		TaskQueue:                x.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            "karvi intake of " + in.BoardURL,
	}, WorkflowName, in)
}

// Status answers QueryStatus.
func (x Intakes) Status(ctx context.Context, board string) (Status, error) {
	var st Status
	v, err := x.Client.QueryWorkflow(ctx, WorkflowID(board), "", QueryStatus)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// Describe describes the intake workflow id's latest run (an intake
// another board's worker may have started, so by id).
func (x Intakes) Describe(ctx context.Context, workflowID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return x.Client.DescribeWorkflowExecution(ctx, workflowID, "")
}
