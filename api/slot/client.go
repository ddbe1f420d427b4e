package slotapi

import (
	"context"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"karvi-edda-temporal/slots"
)

// Temporal is the part of a Temporal client the pools' calls need
// (client.Client has it; tests fake it).
type Temporal interface {
	NewWithStartWorkflowOperation(options client.StartWorkflowOptions, workflow any, args ...any) client.WithStartWorkflowOperation
	UpdateWithStartWorkflow(ctx context.Context, options client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error)
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// Pools is every Temporal call a client makes on agent slot pools. A
// pool's workflow is started on demand by the update that needs it
// (StartOptions), on the PoolQueue of TaskQueue. Errors are the SDK's,
// unwrapped: the caller says what it was doing.
type Pools struct {
	Client Temporal
	// TaskQueue is the workers' shared queue.
	TaskQueue string
	// OnShared starts a new pool on TaskQueue itself, as workers did
	// before PoolQueue (benchmarks compare the two).
	OnShared bool
}

// update sends one update to pool, starting its workflow with in when it
// does not run, and decodes the answer into out. updateID "" lets the
// client pick one.
func (x Pools) update(ctx context.Context, pool string, in PoolInput, name, updateID string, arg, out any) error {
	opts := StartOptions(pool, x.TaskQueue)
	if x.OnShared {
		opts.TaskQueue = x.TaskQueue
	}
	h, err := x.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: x.Client.NewWithStartWorkflowOperation(opts, PoolWorkflowName, in),
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID:   WorkflowID(pool),
			UpdateID:     updateID,
			UpdateName:   name,
			Args:         []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, out)
}

// Set changes the pool's limits (UpdateSet), starting the pool with them
// (in.Limits) when it does not run, and answers its view.
func (x Pools) Set(ctx context.Context, in PoolInput, req SetRequest) (View, error) {
	var v View
	return v, x.update(ctx, in.Pool, in, UpdateSet, "", req, &v)
}

// Acquire asks for one slot (UpdateAcquire); the update's id is the
// key's, so the server answers a repeated acquire from its first outcome.
// A refusal is the pool's temporal.ApplicationError.
func (x Pools) Acquire(ctx context.Context, in PoolInput, req slots.Request) (slots.Answer, error) {
	var ans slots.Answer
	return ans, x.update(ctx, in.Pool, in, UpdateAcquire, req.Key.UpdateID(), req, &ans)
}

// AcquireMany sends many tasks' acquires in one update (UpdateAcquireMany)
// with the id updateID.
func (x Pools) AcquireMany(ctx context.Context, in PoolInput, updateID string, req AcquireMany) (AcquireManyResult, error) {
	var res AcquireManyResult
	return res, x.update(ctx, in.Pool, in, UpdateAcquireMany, updateID, req, &res)
}

// View answers QuerySlots.
func (x Pools) View(ctx context.Context, pool string) (View, error) {
	var view View
	v, err := x.Client.QueryWorkflow(ctx, WorkflowID(pool), "", QuerySlots)
	if err == nil {
		err = v.Get(&view)
	}
	return view, err
}

// Describe describes the pool's latest workflow run.
func (x Pools) Describe(ctx context.Context, pool string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return x.Client.DescribeWorkflowExecution(ctx, WorkflowID(pool), "")
}
