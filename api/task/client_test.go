package taskapi

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"karvi-edda-temporal/mapping"
)

// Every start of a task has one id, refuses a running workflow of it and
// carries the Web UI's summary; only the memo, the reuse of a used id and
// who started it differ between callers.
func TestStartDecidesTheOptionsInOnePlace(t *testing.T) {
	for name, tc := range map[string]struct {
		o     StartOptions
		reuse enumspb.WorkflowIdReusePolicy
	}{
		"a new attempt": {StartOptions{}, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE},
		"never used":    {StartOptions{NeverUsed: true, Memo: map[string]any{"k": 1}, StartedBy: " by me"}, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE},
	} {
		t.Run(name, func(t *testing.T) {
			c := &mocks.Client{}
			run := &mocks.WorkflowRun{}
			in := TaskInput{Dispatch: mapping.DispatchPlan{TaskID: "T1", Message: "do it"}, Attempt: 2}
			summary, details := StartSummary(in.Dispatch, in.Attempt)
			c.On("ExecuteWorkflow", mock.Anything, mock.MatchedBy(func(o client.StartWorkflowOptions) bool {
				return o.ID == "karvi-task-T1" && o.TaskQueue == "q" &&
					o.WorkflowIDConflictPolicy == enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL &&
					o.WorkflowIDReusePolicy == tc.reuse && o.WorkflowExecutionErrorWhenAlreadyStarted &&
					o.StaticSummary == summary && o.StaticDetails == details+tc.o.StartedBy &&
					len(o.Memo) == len(tc.o.Memo)
			}), TaskWorkflowName, in).Return(run, nil).Once()
			got, err := Tasks{Client: c, TaskQueue: "q"}.Start(context.Background(), in, tc.o)
			require.NoError(t, err)
			require.Same(t, run, got)
			c.AssertExpectations(t)
		})
	}
}

// A new workflow of a task starts after the attempt its closed run ended
// on; a run without a result leaves the floor.
func TestNextAttemptFollowsTheLastResult(t *testing.T) {
	for name, tc := range map[string]struct {
		res   Result
		err   error
		floor int
		want  int
	}{
		"after the last":        {Result{Attempt: 3}, nil, 1, 4},
		"the floor is higher":   {Result{Attempt: 3}, nil, 7, 7},
		"no result":             {Result{}, errors.New("terminated"), 2, 2},
		"a result of attempt 0": {Result{}, nil, 2, 2},
	} {
		t.Run(name, func(t *testing.T) {
			c := &mocks.Client{}
			run := &mocks.WorkflowRun{}
			run.On("Get", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
				*args.Get(1).(*Result) = tc.res
			}).Return(tc.err)
			c.On("GetWorkflow", mock.Anything, "karvi-task-T1", "r1").Return(run)
			require.Equal(t, tc.want, Tasks{Client: c}.NextAttempt(context.Background(), "T1", "r1", tc.floor))
		})
	}
}
