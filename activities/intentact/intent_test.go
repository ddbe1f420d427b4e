package intentact

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/mocks"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/intent"
	"karvi-edda-temporal/internal/timescale"
)

// The task or run a fire starts carries the worker's time scale; at real
// time it carries no tuning, as before.
func TestAFireStartsAtTheWorkersTimeScale(t *testing.T) {
	read := func(path ...string) []byte {
		data, err := os.ReadFile(filepath.Join(append([]string{"..", "..", "testdata"}, path...)...))
		require.NoError(t, err)
		return data
	}
	dispatch := intent.Target{Kind: intent.TargetDispatch, Data: read("examples", "A", "dispatch.json")}
	run := intent.Target{Kind: intent.TargetRun, Data: read("runs", "sample.json")}
	for _, tc := range []struct {
		scale timescale.Scale
		want  *taskapi.Tuning
	}{{0, nil}, {1, nil}, {60, &taskapi.Tuning{TimeScale: 60}}} {
		c := &mocks.Client{}
		started := &mocks.WorkflowRun{}
		started.On("GetRunID").Return("r1")
		var task taskapi.TaskInput
		var runIn runapi.RunInput
		c.On("ExecuteWorkflow", mock.Anything, mock.Anything, taskapi.TaskWorkflowName, mock.Anything).
			Run(func(args mock.Arguments) { task = args.Get(3).(taskapi.TaskInput) }).Return(started, nil).Once()
		c.On("ExecuteWorkflow", mock.Anything, mock.Anything, runapi.RunWorkflowName, mock.Anything).
			Run(func(args mock.Arguments) { runIn = args.Get(3).(runapi.RunInput) }).Return(started, nil).Once()
		a := &Activities{Temporal: c, Scale: tc.scale}
		_, err := a.start(context.Background(), StartTargetRequest{Intent: "i", FireID: "f", Target: dispatch, TaskQueue: "q"}, "karvi-task-x", 1)
		require.NoError(t, err)
		_, err = a.start(context.Background(), StartTargetRequest{Intent: "i", FireID: "f", Target: run, TaskQueue: "q"}, "karvi-run-x", 0)
		require.NoError(t, err)
		require.Equal(t, tc.want, task.Tuning, "scale %v", tc.scale)
		require.Equal(t, tc.want, runIn.Tuning, "scale %v", tc.scale)
		c.AssertExpectations(t)
	}
}
