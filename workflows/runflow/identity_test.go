package runflow

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/runstatus"
)

// A task workflow that moved on to later attempts inside (a redispatch, a
// host lost) ends on one of those: the run's next loop starts after it,
// never on a number that workflow's chain used.
func TestRunContinuesFromTheAttemptItsChildReached(t *testing.T) {
	f := &fakeTasks{failFirst: map[string]int{"a": 1}, moved: map[string]int{"a": 1}}
	env, _ := runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(`{"title":"One","slug":"one","tasks":[{"id":"a","title":"A"}]}`)})
	doc := runResult(t, env)
	require.Equal(t, runstatus.TaskDone, doc.Tasks["a"].Status)
	atts := f.attemptsOf("a")
	require.Len(t, atts, 2)
	require.Equal(t, 1, atts[0].Attempt)
	require.Equal(t, 3, atts[1].Attempt, "child 1 ended on its attempt 2; the next loop is attempt 3")
}

// gitRun is a run in a repository whose git steps fail as told, with
// non-retryable errors so that the test need not wait out the retries.
func gitRun(t *testing.T, prepareFails bool, worktreeFails, mergeFails string) (*fakeTasks, runstatus.Status) {
	t.Helper()
	f := &fakeTasks{}
	env, root := runEnv(t, f)
	env.RegisterActivity(gitActs)
	broken := func(what string) error {
		return temporal.NewNonRetryableApplicationError(what+": git exited 128", "GitFailed", nil)
	}
	env.OnActivity(gitActs.PrepareRepo, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req runact.PrepareRepoRequest) (runact.PrepareRepoResult, error) {
			if prepareFails {
				return runact.PrepareRepoResult{}, broken("prepare")
			}
			return runact.PrepareRepoResult{Repo: req.Repo}, nil
		})
	env.OnActivity(gitActs.CreateWorktree, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req runact.CreateWorktreeRequest) (runact.CreateWorktreeResult, error) {
			if req.TaskID == worktreeFails {
				return runact.CreateWorktreeResult{}, broken("worktree")
			}
			return runact.CreateWorktreeResult{Path: "/repo/.worktrees/" + req.TaskID, RelPath: ".worktrees/" + req.TaskID,
				Branch: req.FeatureBranch + "-" + req.TaskID}, nil
		})
	env.OnActivity(gitActs.MergeTask, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req runact.MergeTaskRequest) (runact.MergeTaskResult, error) {
			if strings.HasSuffix(req.Branch, "-"+mergeFails) {
				return runact.MergeTaskResult{}, broken("merge")
			}
			return runact.MergeTaskResult{Merged: true}, nil
		})
	env.OnActivity(gitActs.RemoveWorktree, mock.Anything, mock.Anything).Return(nil)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Repo: filepath.Join(root, "repo"),
		Run: json.RawMessage(`{"title":"Three","slug":"three","concurrency":3,"tasks":[{"id":"a","title":"A"},{"id":"b","title":"B"},{"id":"c","title":"C"}]}`)})
	return f, runResult(t, env)
}

// A git step that exhausts its retries fails the task it was for, not the
// whole run: the other tasks go on and status.json says what happened.
func TestAGitStepFailsItsTaskNotTheRun(t *testing.T) {
	_, doc := gitRun(t, false, "a", "b")
	require.Equal(t, runstatus.TaskFailed, doc.Tasks["a"].Status)
	require.Contains(t, doc.Tasks["a"].Error, "worktree: git exited 128")
	require.Equal(t, runstatus.TaskFailed, doc.Tasks["b"].Status)
	require.Contains(t, doc.Tasks["b"].Error, "merge: git exited 128")
	require.Equal(t, runstatus.TaskDone, doc.Tasks["c"].Status)
	require.Equal(t, runstatus.RunPartial, doc.Status)
}

// Without its feature branch no task can start: each fails saying why, and
// the run ends with status.json written.
func TestARepositoryThatCannotBePreparedFailsItsTasks(t *testing.T) {
	f, doc := gitRun(t, true, "", "")
	for _, id := range []string{"a", "b", "c"} {
		require.Equal(t, runstatus.TaskFailed, doc.Tasks[id].Status, id)
		require.Contains(t, doc.Tasks[id].Error, "prepare: git exited 128", id)
	}
	require.Empty(t, f.calls, "no task started")
	require.NotEqual(t, runstatus.RunActive, doc.Status)
}
