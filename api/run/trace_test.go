package runapi

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"karvi-edda-temporal/internal/tracing"
	"karvi-edda-temporal/traces"
)

// Whoever starts a run (the starter, the intake, a schedule's fire, a
// test) begins the run's trace: Start itself makes the run's root the
// parent of the start, and the run's tasks join it.
func TestStartBeginsTheRunsTrace(t *testing.T) {
	// An endpoint nothing listens on: no span is exported by a start.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tr, err := tracing.Setup(context.Background(), &client.Options{})
	require.NoError(t, err)
	require.NotNil(t, tr)
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })

	file := json.RawMessage(`{"title":"Profiles","slug":"profiles","tasks":[{"id":"a","title":"A"}]}`)
	root := traces.ForRun("profiles").RootContext()
	c := &mocks.Client{}
	c.On("ExecuteWorkflow", mock.MatchedBy(func(ctx context.Context) bool {
		sc := trace.SpanContextFromContext(ctx)
		return sc.TraceID() == root.TraceID() && sc.SpanID() == root.SpanID()
	}), mock.Anything, RunWorkflowName, mock.Anything).Return(&mocks.WorkflowRun{}, nil).Once()
	_, err = Runs{Client: c, TaskQueue: "q"}.Start(context.Background(), RunInput{Run: file}, StartOptions{})
	require.NoError(t, err)
	c.AssertExpectations(t)
}
