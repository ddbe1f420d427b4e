package runflow

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
)

// A run with a pool hands it to every task it starts, as that run; a run
// without one starts its tasks as always.
func TestRunPassesItsPoolToItsTasks(t *testing.T) {
	f := &fakeTasks{}
	env, _ := runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun), Pool: "agents"})
	require.Equal(t, runstatus.RunComplete, runResult(t, env).Status)
	require.Len(t, f.calls, 5)
	for _, c := range f.calls {
		require.Equal(t, &taskapi.SlotRequest{Pool: "agents", Run: "diamond"}, c.Slots, c.Dispatch.TaskID)
	}

	f = &fakeTasks{}
	env, _ = runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun)})
	require.Equal(t, runstatus.RunComplete, runResult(t, env).Status)
	for _, c := range f.calls {
		require.Nil(t, c.Slots, c.Dispatch.TaskID)
	}
}

// A task of a run that its pool refuses a slot (its run reached
// max_total) fails at once: another loop would be refused the same.
func TestRunDoesNotLoopATaskRefusedASlot(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: runapi.RunWorkflowName})
	var mu sync.Mutex
	attempts := map[string]int{}
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in taskapi.TaskInput) (taskapi.Result, error) {
		id := in.Dispatch.TaskID
		mu.Lock()
		attempts[id]++
		mu.Unlock()
		if err := workflow.Sleep(ctx, time.Minute); err != nil {
			return taskapi.Result{}, err
		}
		res := taskapi.Result{TaskID: id, Attempt: in.Attempt, Dispatch: in.Dispatch, Outcome: mapping.CompletedOutcome()}
		if id == "c" {
			// What a task refused a slot ends with (the task wing's noSlotOutcome).
			msg := "no agent slot in pool agents: max_total (run diamond was granted 2 slots, max_total is 2)"
			res.Outcome = mapping.Outcome{PlanStatus: mapping.PlanBlocked, TaskStatus: mapping.TaskBlocked,
				DispatchState: mapping.DispatchFailed, LastError: msg, BlockerReason: msg, Code: 1, ErrorType: taskapi.ErrorNoSlot}
		}
		return res, nil
	}, workflow.RegisterOptions{Name: taskapi.TaskWorkflowName})
	env.RegisterActivity(&runact.Activities{Config: activities.Config{WorkRoot: t.TempDir()}})
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun), Pool: "agents"})
	doc := runResult(t, env)
	require.Equal(t, runstatus.RunPartial, doc.Status)
	require.Equal(t, 1, attempts["c"], "no loop for a refused slot")
	require.Equal(t, runstatus.TaskFailed, doc.Tasks["c"].Status)
	require.Equal(t, "no agent slot in pool agents: max_total (run diamond was granted 2 slots, max_total is 2)", doc.Tasks["c"].Error)
	require.Equal(t, runstatus.TaskBlocked, doc.Tasks["d"].Status)
}
