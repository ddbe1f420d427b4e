package wfstart

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// answering sets its query handler first thing, then waits to be told to
// stop.
func answering(ctx workflow.Context, name string) (string, error) {
	if err := workflow.SetQueryHandler(ctx, "name", func() (string, error) { return name, nil }); err != nil {
		return "", err
	}
	workflow.GetSignalChannel(ctx, "stop").Receive(ctx, nil)
	return name, nil
}

func newEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	return s.NewTestWorkflowEnvironment()
}

// The test environment begins the workflow function only after a round
// trip through a goroutine of its own, and meanwhile fires a delayed
// callback by the wall clock. Here that goroutine is held until 2 ms of
// workflow time, as a loaded machine may hold it: a query 1 ms into the
// run, taken from the start of the environment, would find no handler. One
// taken from the start of the workflow function finds it.
func TestAfterCountsFromTheWorkflowFunction(t *testing.T) {
	env := newEnv()
	started := Install(env)
	release := make(chan struct{})
	env.OnWorkflow(answering, mock.Anything, mock.Anything).Run(func(mock.Arguments) { <-release }).Return(answering)
	env.RegisterDelayedCallback(func() { close(release) }, 2*time.Millisecond)
	var got string
	started.After(time.Millisecond, func() {
		v, err := env.QueryWorkflow("name")
		require.NoError(t, err)
		require.NoError(t, v.Get(&got))
		env.SignalWorkflow("stop", nil)
	})
	env.ExecuteWorkflow(answering, "w")
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, "w", got)
}

// A callback asked for once the workflow runs counts from that moment.
func TestAfterWhileRunning(t *testing.T) {
	env := newEnv()
	started := Install(env)
	var at []time.Duration
	begin := env.Now()
	started.After(0, func() {
		at = append(at, env.Now().Sub(begin))
		started.After(time.Minute, func() {
			at = append(at, env.Now().Sub(begin))
			env.SignalWorkflow("stop", nil)
		})
	})
	env.ExecuteWorkflow(answering, "w")
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []time.Duration{0, time.Minute}, at)
}
