package taskflow

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// A conductor killed while test ran, after docs failed its first try and
// passed its second: edda left docs' first error in state.json.
func runKilledAfterRetriedPass(t *testing.T, recordedBefore bool) (taskapi.Result, *fakeConductor) {
	t.Helper()
	env := newEnv(t)
	if recordedBefore {
		// What a history recorded before the change replays with.
		env.OnGetVersion(versionCurrentErrors, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	}
	var evs []mapping.Event
	for _, l := range []string{
		`{"type":"phase_start","phase_id":"implement","attempt":1}`,
		`{"type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":1000,"cost_usd":0.1}`,
		`{"type":"phase_start","phase_id":"docs","attempt":1}`,
		`{"type":"phase_failed","phase_id":"docs","attempt":1,"duration_ms":1000,"error":"exit 1: boom"}`,
		`{"type":"phase_start","phase_id":"docs","attempt":2}`,
		`{"type":"phase_passed","phase_id":"docs","attempt":2,"duration_ms":1000,"cost_usd":0.1}`,
		`{"type":"phase_start","phase_id":"test","attempt":1}`,
	} {
		ev, err := mapping.ParseEvent([]byte(l))
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	cs, err := mapping.ParseConductorState([]byte(`{"plan_name":"karvi-t5-020d01","plan_status":"running","total_cost_usd":0.2,"phases":[
		{"id":"implement","status":"passed","attempts":1,"checks":[]},
		{"id":"test","status":"running","attempts":1,"checks":[]},
		{"id":"docs","status":"passed","attempts":2,"checks":[],
		 "error":{"error_type":"check_failed","message":"exit 1: boom","retryable":true,"check_index":0,"timestamp":"2026-02-28T03:01:00Z"}}]}`))
	require.NoError(t, err)
	f := &fakeConductor{t: t, events: evs, perBatch: 2, exitAfterAll: true, exitState: &cs, exitCode: -1}
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	return res, f
}

func TestConductorKilledAfterARetriedPassBlamesTheRunningPhase(t *testing.T) {
	res, f := runKilledAfterRetriedPass(t, false)
	want := "Conductor crashed: conductor was killed (no exit status was recorded) while phase test was running, leaving the plan running"
	require.Equal(t, mapping.ErrAgentCrash, res.Outcome.ErrorType)
	require.Equal(t, want, res.Outcome.LastError)
	last := f.statuses[len(f.statuses)-1]
	require.Equal(t, mapping.TaskBlocked, last.Status)
	require.Equal(t, want, last.Reason)
	// docs stays passed in the brief; test, interrupted, says why.
	require.Equal(t, mapping.PhasePassed, res.Brief.Phases["docs"].Status)
	require.Equal(t, mapping.PhaseFailed, res.Brief.Phases["test"].Status)
	require.Equal(t, want, res.Brief.Phases["test"].Error)
}

// A workflow recorded before keeps the outcome it decided then.
func TestConductorKilledAfterARetriedPassRecordedBefore(t *testing.T) {
	res, _ := runKilledAfterRetriedPass(t, true)
	require.Equal(t, mapping.ErrCheckFailed, res.Outcome.ErrorType)
	require.True(t, strings.HasPrefix(res.Outcome.LastError, "Phase docs failed after 2 attempts"), res.Outcome.LastError)
}
