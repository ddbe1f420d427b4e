package taskact

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/mapping"
)

// Two workflow chains of one task both make an attempt 1: the second is a
// new attempt with a run directory and a conductor of its own, never a
// re-attachment to the first chain's run (which is stopped, as any other
// attempt of the task given up on this host).
func TestAnotherChainsAttemptStartsItsOwnConductor(t *testing.T) {
	a, env, _ := fenceActivities(t, "h1")
	start := func(nonce string) StartAttemptResult {
		v, err := env.ExecuteActivity(a.StartAttempt, StartAttemptRequest{Dispatch: exampleDispatch(t), Attempt: 1,
			Nonce: nonce, MaxWait: 10 * time.Millisecond, CheckpointEvery: 10 * time.Millisecond})
		require.NoError(t, err)
		var res StartAttemptResult
		require.NoError(t, v.Get(&res))
		require.NotNil(t, res.Conductor, res.StartError)
		return res
	}
	first := start("0a1b2c3d")
	second := start("ffee0011")
	require.Equal(t, mapping.AttemptPlanName("T5", 1, "0a1b2c3d"), first.Plan.Summary.Name)
	require.Equal(t, mapping.AttemptPlanName("T5", 1, "ffee0011"), second.Plan.Summary.Name)
	require.NotEqual(t, first.Plan.RunDir, second.Plan.RunDir)
	require.NotEqual(t, first.Conductor.PID, second.Conductor.PID, "the second chain started a conductor of its own")
	live, err := a.LiveRuns("T5")
	require.NoError(t, err)
	require.Equal(t, []LiveRun{{TaskID: "T5", Plan: second.Plan.Summary.Name, Dir: second.Plan.RunDir, Handle: *second.Conductor}}, live)
}
