package errtext

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const planError = `dispatch plan: skill: no plan template named "x"`

func TestRoot(t *testing.T) {
	app := temporal.NewNonRetryableApplicationError(planError, "InvalidDispatch", nil)
	for name, c := range map[string]struct {
		err  error
		want string
	}{
		"nil":                     {nil, ""},
		"plain keeps its context": {fmt.Errorf("dial 127.0.0.1:7233: %w", errors.New("connection refused")), "dial 127.0.0.1:7233: connection refused"},
		"application error":       {app, planError},
		"wrapped by fmt":          {fmt.Errorf("workflow execution error: %w", fmt.Errorf("activity error: %w", app)), planError},
		"innermost of two":        {temporal.NewApplicationErrorWithCause("start attempt 1", "Wrapper", app), planError},
		"spaces trimmed":          {temporal.NewApplicationError(" spaced \n", "T"), "spaced"},
		"activity failed":         {runActivity(t, func(context.Context) error { return app }), planError},
		"activity timed out":      {runActivity(t, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }), "Activity timeout (type: StartToClose): context deadline exceeded"},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, c.want, Root(c.err))
		})
	}
}

// runActivity is the error a workflow gets from an activity that does act:
// Temporal's own wrappers around what the activity returned.
func runActivity(t *testing.T, act func(context.Context) error) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	// The SDK's 1 s deadlock detector fired here on a CI machine loaded by
	// the race detector and the suites; this test is about error wording.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterActivityWithOptions(act, activityOptions)
	var got error
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 50 * time.Millisecond,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		got = workflow.ExecuteActivity(ctx, activityOptions.Name).Get(ctx, nil)
		return nil
	})
	require.NoError(t, env.GetWorkflowError())
	require.Error(t, got)
	return got
}

var activityOptions = activity.RegisterOptions{Name: "act"}
