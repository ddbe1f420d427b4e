package runapi

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
)

func TestSlugOfIsWorkflowIDsInverse(t *testing.T) {
	require.Equal(t, "user-profiles", SlugOf(WorkflowID("user-profiles")))
	require.Equal(t, "", SlugOf("karvi-task-t1"))
}

// A run is started under its slug's id, with its title in the summary,
// whether or not its input comes packed (a reopened run's handover).
func TestStartNamesTheRunFromItsFile(t *testing.T) {
	file := json.RawMessage(`{"title":"Profiles","slug":"profiles","tasks":[{"id":"a","title":"A"}]}`)
	packed, err := RunInput{Run: file}.Pack()
	require.NoError(t, err)
	for name, in := range map[string]RunInput{"plain": {Run: file}, "packed": packed} {
		t.Run(name, func(t *testing.T) {
			c := &mocks.Client{}
			run := &mocks.WorkflowRun{}
			c.On("ExecuteWorkflow", mock.Anything, mock.MatchedBy(func(o client.StartWorkflowOptions) bool {
				return o.ID == "karvi-run-profiles" && o.TaskQueue == "q" &&
					o.StaticSummary == "Run profiles: Profiles (1 tasks), reopened to retry a" &&
					o.WorkflowIDConflictPolicy == enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL &&
					o.WorkflowIDReusePolicy == enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE &&
					o.WorkflowExecutionErrorWhenAlreadyStarted
			}), RunWorkflowName, in).Return(run, nil).Once()
			_, err := Runs{Client: c, TaskQueue: "q"}.Start(context.Background(), in, StartOptions{Reopened: "retry a"})
			require.NoError(t, err)
			c.AssertExpectations(t)
		})
	}
}
