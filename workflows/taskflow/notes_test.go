package taskflow

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// A note that arrives in the same workflow task as the checkpoint before
// continue-as-new is handed over with the state, and the continued run
// puts it in the brief: the root coroutine marshals the state before any
// other coroutine runs, so nothing may wait in one for the note.
func TestNoteWithTheLastCheckpointSurvivesContinueAsNew(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1}
	delivered := 0
	note := taskapi.NoteSignal{Action: "budget", Detail: "Budget 80% reached ($8.00 of $10.00)"}
	f.afterDeliver = func() error {
		delivered++
		if delivered == 2 { // the third poll: continue-as-new follows it
			env.SignalWorkflowSkippingWorkflowTask(taskapi.SignalNote, note)
		}
		return nil
	}
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t),
		Tuning: &taskapi.Tuning{ContinueAsNewAfterPolls: 3}})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "expected continue-as-new, got %v", env.GetWorkflowError())
	var next taskapi.TaskInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	var resumed State
	require.NoError(t, json.Unmarshal(next.Resume, &resumed))
	inBrief := func(log []mapping.LogEntry) bool {
		for _, e := range log {
			if e.Detail == note.Detail {
				return true
			}
		}
		return false
	}
	carried := len(resumed.Budget.Notes) == 1 && resumed.Budget.Notes[0] == note
	require.True(t, carried != inBrief(resumed.Current.Brief.Brief.Log),
		"the note is neither applied nor handed over (carried %v)", resumed.Budget.Notes)

	resumed.Tuning = nil
	next.Resume, _ = json.Marshal(resumed)
	f.afterDeliver = nil
	res := runToEnd(t, f, next)
	require.True(t, inBrief(res.Brief.Log), "the note never reached the brief")
}
