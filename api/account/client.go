package accountapi

import (
	"context"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// Temporal is the part of a Temporal client the accounts' calls need
// (client.Client has it; tests fake it).
type Temporal interface {
	NewWithStartWorkflowOperation(options client.StartWorkflowOptions, workflow any, args ...any) client.WithStartWorkflowOperation
	UpdateWithStartWorkflow(ctx context.Context, options client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error)
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
	SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
		options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error)
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
	DescribeWorkflow(ctx context.Context, workflowID, runID string) (*client.WorkflowExecutionDescription, error)
}

// Accounts is every Temporal call a client makes on agent accounts. An
// account's workflow is started on demand, on TaskQueue, by the update or
// the join that needs it (StartOptions). Errors are the SDK's, unwrapped:
// the caller says what it was doing.
type Accounts struct {
	Client    Temporal
	TaskQueue string
}

// Update sends one of the account's updates (UpdateLimit, UpdateResume,
// UpdateJoin) with its request, starting the account when it does not
// run, and answers the account's view. updateID "" lets the client pick
// one.
func (x Accounts) Update(ctx context.Context, account, name, updateID string, arg any) (View, error) {
	h, err := x.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: x.Client.NewWithStartWorkflowOperation(StartOptions(account, x.TaskQueue),
			WorkflowName, Input{Account: account}),
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID:   WorkflowID(account),
			UpdateID:     updateID,
			UpdateName:   name,
			Args:         []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return View{}, err
	}
	var v View
	return v, h.Get(ctx, &v)
}

// Resume ends the account's pause now (UpdateResume).
func (x Accounts) Resume(ctx context.Context, account, reason string) (View, error) {
	return x.Update(ctx, account, UpdateResume, "", ResumeRequest{Reason: reason})
}

// Join makes a task a member by signal (SignalJoin), starting the
// account when it does not run.
func (x Accounts) Join(ctx context.Context, account string, r JoinRequest) error {
	_, err := x.Client.SignalWithStartWorkflow(ctx, WorkflowID(account), SignalJoin, r,
		StartOptions(account, x.TaskQueue), WorkflowName, Input{Account: account})
	return err
}

// Leave ends a task's membership (SignalLeave).
func (x Accounts) Leave(ctx context.Context, account, member string) error {
	return x.Client.SignalWorkflow(ctx, WorkflowID(account), "", SignalLeave, LeaveSignal{Member: member})
}

// View answers QueryAccount.
func (x Accounts) View(ctx context.Context, account string) (View, error) {
	v, err := x.Client.QueryWorkflow(ctx, WorkflowID(account), "", QueryAccount)
	if err != nil {
		return View{}, err
	}
	var view View
	return view, v.Get(&view)
}

// Describe describes the account's latest workflow run (its memo holds
// the pause, MemoPause).
func (x Accounts) Describe(ctx context.Context, account string) (*client.WorkflowExecutionDescription, error) {
	return x.Client.DescribeWorkflow(ctx, WorkflowID(account), "")
}
