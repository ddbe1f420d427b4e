package runflow

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/runflow/runapi"
)

// A task told early and still closing does not hold a continue-as-new
// back: the run hands over with it done.
func TestRunContinuesAsNewWhileATaskToldEarlyCloses(t *testing.T) {
	f := &fakeTasks{lingers: map[string]time.Duration{"a": time.Hour}}
	env, _ := runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun), ContinueAsNewAfter: 3})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "the run should have continued as new, got %v", env.GetWorkflowError())
	var next runapi.RunInput
	require.NoError(t, json.Unmarshal(can.Input.Payloads[0].Data, &next))
	next, err := next.Unpack()
	require.NoError(t, err)
	var st runState
	require.NoError(t, json.Unmarshal(next.Resume, &st))
	require.Equal(t, runstatus.TaskDone, st.Doc.Tasks["a"].Status)
	require.False(t, st.Tasks["a"].Running)
	// b and c ran a minute from a's end; a closed an hour after it.
	require.True(t, st.Tasks["b"].Running, "the hand-over waited for a to close")
}
