package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/internal/errtext"
)

// WorkflowAwaiter is the part of a Temporal client AwaitWorkflow needs.
type WorkflowAwaiter interface {
	GetWorkflow(ctx context.Context, workflowID, runID string) client.WorkflowRun
}

// AwaitWorkflow waits for a workflow run to close, following its
// continue-as-new chain and heartbeating meanwhile, and decodes its result
// into out. A workflow that closed without one (failed, terminated, timed
// out, cancelled, not found) gives failure, saying why; a wait that failed
// (the server, the network) gives err, so the activity is retried and
// waits again.
func AwaitWorkflow(ctx context.Context, cl WorkflowAwaiter, id, runID string, out any) (failure string, err error) {
	stop := Heartbeat(ctx, HeartbeatEvery)
	defer stop()
	err = cl.GetWorkflow(ctx, id, runID).Get(ctx, out)
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		return "", nil
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.As(err, &notFound):
		return fmt.Sprintf("%s not found", id), nil
	case closedWithoutResult(err):
		return fmt.Sprintf("%s ended without a result: %s", id, errtext.Root(err)), nil
	}
	return "", fmt.Errorf("wait for %s: %w", id, err)
}

// closedWithoutResult tells a workflow that ended badly from a failed wait.
func closedWithoutResult(err error) bool {
	var (
		closed     *temporal.WorkflowExecutionError
		terminated *temporal.TerminatedError
		timeout    *temporal.TimeoutError
		canceled   *temporal.CanceledError
		app        *temporal.ApplicationError
		panicked   *temporal.PanicError
	)
	return errors.As(err, &closed) || errors.As(err, &terminated) || errors.As(err, &timeout) || errors.As(err, &canceled) ||
		errors.As(err, &app) || errors.As(err, &panicked)
}
