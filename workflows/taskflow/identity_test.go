package taskflow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/slots"
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
	all := loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")
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

// A waiter whose pool was terminated (it never hears its turn) asks again
// from time to time: the acquire is idempotent per key, and the fresh pool
// that the next ask starts answers it.
func TestAWaiterOfAGonePoolAsksAgain(t *testing.T) {
	env := newEnv(t)
	env.SetTestTimeout(30 * time.Second)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 100}
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
