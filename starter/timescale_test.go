package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/mocks"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

func withEnv(t *testing.T, m map[string]string) {
	t.Helper()
	old := getenv
	getenv = func(k string) string { return m[k] }
	t.Cleanup(func() { getenv = old })
}

// The tasks, runs and pools the starter starts carry KARVI_EDDA_TIME_SCALE;
// without it they carry nothing new, and a bad value is refused naming
// the variable before anything is started.
func TestStartsCarryTheTimeScale(t *testing.T) {
	for _, tc := range []struct {
		env    string
		tuning *taskapi.Tuning
		pool   float64
	}{
		{"", nil, 0},
		{"1", nil, 0},
		{"60", &taskapi.Tuning{TimeScale: 60}, 60},
	} {
		withEnv(t, map[string]string{"KARVI_EDDA_TIME_SCALE": tc.env})
		c := &mocks.Client{}
		c.On("DescribeWorkflowExecution", mock.Anything, mock.Anything, "").Return(nil, serviceerror.NewNotFound("none"))
		run := &mocks.WorkflowRun{}
		run.On("GetRunID").Return("r1")
		var task taskapi.TaskInput
		var runIn runapi.RunInput
		var pool slotapi.PoolInput
		c.On("ExecuteWorkflow", mock.Anything, mock.Anything, taskapi.TaskWorkflowName, mock.Anything).
			Run(func(a mock.Arguments) { task = a.Get(3).(taskapi.TaskInput) }).Return(run, nil).Once()
		c.On("ExecuteWorkflow", mock.Anything, mock.Anything, runapi.RunWorkflowName, mock.Anything).
			Run(func(a mock.Arguments) { runIn = a.Get(3).(runapi.RunInput) }).Return(run, nil).Once()
		c.On("NewWithStartWorkflowOperation", mock.Anything, slotapi.PoolWorkflowName, mock.Anything).
			Run(func(a mock.Arguments) { pool = a.Get(2).(slotapi.PoolInput) }).Return(nil).Once()
		c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Return(nil, errors.New("no server")).Once()

		ctx, out := context.Background(), &bytes.Buffer{}
		require.NoError(t, start(ctx, c, "q", taskapi.TaskInput{Dispatch: mapping.DispatchPlan{TaskID: "T1"}}, out))
		require.NoError(t, startRun(ctx, c, "q", "../testdata/runs/sample.json", runStartOpts{}, nil, out))
		require.ErrorContains(t, setSlots(ctx, c, "q", "p", slotapi.SetRequest{MaxConcurrent: 1}, out), "no server")
		require.Equal(t, tc.tuning, task.Tuning, "scale %q", tc.env)
		require.Equal(t, tc.tuning, runIn.Tuning, "scale %q", tc.env)
		require.Equal(t, tc.pool, pool.TimeScale, "scale %q", tc.env)
		c.AssertExpectations(t)
	}

	withEnv(t, map[string]string{"KARVI_EDDA_TIME_SCALE": "fast"})
	c := &mocks.Client{}
	err := start(context.Background(), c, "q", taskapi.TaskInput{Dispatch: mapping.DispatchPlan{TaskID: "T1"}}, &bytes.Buffer{})
	require.ErrorContains(t, err, `KARVI_EDDA_TIME_SCALE: time scale "fast"`)
	c.AssertExpectations(t) // nothing was asked of Temporal
}
