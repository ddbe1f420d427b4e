package workflows

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/slots"
	"karvi-edda-temporal/workflows/runapi"
	"karvi-edda-temporal/workflows/taskapi"
)

// testNonce is the nonce of the test environment's workflow chain, once
// withChains gave it a first run id.
func testNonce() string {
	return mapping.AttemptNonce("default-test-workflow-id", "default-test-run-id")
}

// withChains gives the test environment's workflows a first run id (their
// run id), as a server does, so their attempts carry a nonce.
func withChains(t *testing.T) {
	prev := firstRunID
	firstRunID = func(info *workflow.Info) string { return info.WorkflowExecution.RunID }
	t.Cleanup(func() { firstRunID = prev })
}

// Every attempt of a task workflow carries its chain's nonce, so its plan
// name (its run directory, conductor state and slot) is its own: a later
// workflow of the same task never lands on it.
func TestAttemptsCarryTheirChainsNonce(t *testing.T) {
	withChains(t)
	env := newEnv(t)
	all := loadEvents(t, "../testdata/examples/A/events.snake.jsonl")
	f := &fakeConductor{t: t, events: all[:2], perBatch: 1, nonceNames: true}
	f.register(env)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.hang = true
		f.mu.Unlock()
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.hang, f.events = false, all
		f.mu.Unlock()
		env.SignalWorkflow(taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: "try again"})
	}, 10*time.Second)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	nonce := testNonce()
	require.NotEmpty(t, nonce)
	require.Len(t, f.prepared, 2)
	for i, p := range f.prepared {
		require.Equal(t, nonce, p.Nonce, "attempt %d", i+1)
	}
	require.Equal(t, mapping.AttemptPlanName("T5", 2, nonce), res.PlanName)
	require.Equal(t, mapping.AttemptPlanName("T5", 1, nonce), res.Attempts[0].PlanName)
}

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

// A waiter whose pool was terminated (it never hears its turn) asks again
// from time to time: the acquire is idempotent per key, and the fresh pool
// that the next ask starts answers it.
func TestAWaiterOfAGonePoolAsksAgain(t *testing.T) {
	env := newEnv(t)
	env.SetTestTimeout(30 * time.Second)
	f := &fakeConductor{t: t, events: loadEvents(t, "../testdata/examples/A/events.snake.jsonl"), perBatch: 100}
	f.register(env)
	p := &fakePool{answers: []slots.Answer{{State: slots.Queued, Position: 1}, {State: slots.Granted}}}
	p.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, slotInput(t, &taskapi.SlotRequest{}))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus)
	require.Equal(t, []string{"agents: T5#1", "agents: T5#1"}, p.asked(), "the same key, asked again")
	require.Equal(t, 1, f.starts)
}

// gitRun is a run in a repository whose git steps fail as told, with
// non-retryable errors so that the test need not wait out the retries.
func gitRun(t *testing.T, prepareFails bool, worktreeFails, mergeFails string) (*fakeTasks, runstatus.Status) {
	t.Helper()
	f := &fakeTasks{}
	env, root := runEnv(t, f)
	env.RegisterActivity(acts)
	broken := func(what string) error {
		return temporal.NewNonRetryableApplicationError(what+": git exited 128", "GitFailed", nil)
	}
	env.OnActivity(acts.PrepareRepo, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.PrepareRepoRequest) (activities.PrepareRepoResult, error) {
			if prepareFails {
				return activities.PrepareRepoResult{}, broken("prepare")
			}
			return activities.PrepareRepoResult{Repo: req.Repo}, nil
		})
	env.OnActivity(acts.CreateWorktree, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.CreateWorktreeRequest) (activities.CreateWorktreeResult, error) {
			if req.TaskID == worktreeFails {
				return activities.CreateWorktreeResult{}, broken("worktree")
			}
			return activities.CreateWorktreeResult{Path: "/repo/.worktrees/" + req.TaskID, RelPath: ".worktrees/" + req.TaskID,
				Branch: req.FeatureBranch + "-" + req.TaskID}, nil
		})
	env.OnActivity(acts.MergeTask, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.MergeTaskRequest) (activities.MergeTaskResult, error) {
			if strings.HasSuffix(req.Branch, "-"+mergeFails) {
				return activities.MergeTaskResult{}, broken("merge")
			}
			return activities.MergeTaskResult{Merged: true}, nil
		})
	env.OnActivity(acts.RemoveWorktree, mock.Anything, mock.Anything).Return(nil)
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
