package runflow

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/runstatus"
)

// A task told early and still closing does not hold a continue-as-new
// back: the run hands over with it done.
func TestRunContinuesAsNewWhileATaskToldEarlyCloses(t *testing.T) {
	f := &fakeTasks{lingers: map[string]time.Duration{"a": time.Hour}}
	env, _ := runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun), ContinueAsNewAfter: 3})
	st := handedOver(t, env)
	require.Equal(t, runstatus.TaskDone, st.Doc.Tasks["a"].Status)
	require.False(t, st.Tasks["a"].Running)
	// b and c ran a minute from a's end; a closed an hour after it.
	require.True(t, st.Tasks["b"].Running, "the hand-over waited for a to close")
}

// A run due to continue-as-new starts no more tasks until it has: each
// start holds the hand-over back until the server answers it, so a run
// that kept starting tasks would never hand over.
func TestARunDueToHandOverStartsNoMoreTasks(t *testing.T) {
	f := &fakeTasks{}
	env, _ := runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(`{"title":"Wide","slug":"wide","concurrency":5,"tasks":[
		{"id":"a","title":"A"},{"id":"b","title":"B"},{"id":"c","title":"C"},{"id":"d","title":"D"},{"id":"e","title":"E"},{"id":"f","title":"F"}]}`),
		ContinueAsNewAfter: 3})
	st := handedOver(t, env)
	require.Len(t, f.calls, 3, "started past its hand-over: %v", f.order)
	for id, want := range map[string]runstatus.TaskState{"a": runstatus.TaskRunning, "c": runstatus.TaskRunning, "d": runstatus.TaskQueued, "f": runstatus.TaskQueued} {
		require.Equal(t, want, st.Doc.Tasks[id].Status, id)
	}
}

// handedOver is the state a run that continued as new handed over.
func handedOver(t *testing.T, env *testsuite.TestWorkflowEnvironment) runState {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "the run should have continued as new, got %v", env.GetWorkflowError())
	var next runapi.RunInput
	require.NoError(t, json.Unmarshal(can.Input.Payloads[0].Data, &next))
	next, err := next.Unpack()
	require.NoError(t, err)
	var st runState
	require.NoError(t, json.Unmarshal(next.Resume, &st))
	return st
}
