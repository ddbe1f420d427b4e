package taskapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"karvi-edda-temporal/internal/tracing"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/traces"
)

// Whoever starts a task (the starter, the intake's claim, a schedule's
// fire, a test) begins the task's trace: Start itself makes the task's
// root the parent of the start, so no caller can forget it.
func TestStartBeginsTheTasksTrace(t *testing.T) {
	// An endpoint nothing listens on: no span is exported by a start.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tr, err := tracing.Setup(context.Background(), &client.Options{})
	require.NoError(t, err)
	require.NotNil(t, tr)
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })

	d := mapping.DispatchPlan{TaskID: "T1", PlanID: "p1", Message: "do it"}
	root := traces.ForTask(d.TaskID, d.PlanID).RootContext()
	c := &mocks.Client{}
	c.On("ExecuteWorkflow", mock.MatchedBy(func(ctx context.Context) bool {
		sc := trace.SpanContextFromContext(ctx)
		return sc.TraceID() == root.TraceID() && sc.SpanID() == root.SpanID()
	}), mock.Anything, TaskWorkflowName, mock.Anything).Return(&mocks.WorkflowRun{}, nil).Once()
	_, err = Tasks{Client: c, TaskQueue: "q"}.Start(context.Background(), TaskInput{Dispatch: d}, StartOptions{})
	require.NoError(t, err)
	c.AssertExpectations(t)
}
