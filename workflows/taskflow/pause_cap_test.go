package taskflow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// The pause cap counts the task's own usage limits: ten pauses its
// account's other tasks caused, each resumed, leave a first limit of its
// own a pause like any other.
func TestAccountPausesDoNotCountTowardsThePauseCap(t *testing.T) {
	env, c := newAccountRig(t)
	start := env.Now()
	c.deliverEvery = 20 * time.Second
	const notices = 10
	for k := range notices {
		at := time.Duration(k)*3*time.Minute + 10*time.Second
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(accountapi.SignalNotice, accountapi.Notice{Account: "team", Until: start.Add(at + time.Minute), By: "T9", Phase: "implement"})
		}, at)
	}
	c.limitAt = start.Add(notices*3*time.Minute + time.Minute)
	c.limitReset = 10 * time.Minute
	c.completeAfterResumes = notices + 1
	var st taskapi.Status
	statusAt(t, env, notices*3*time.Minute+5*time.Minute, &st)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Account: "team"})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
	require.True(t, c.limitMet)
	require.Len(t, c.resumedAt, notices+1)
	require.NotContains(t, c.statuses, mapping.TaskBlocked)
	require.Equal(t, taskapi.StagePaused, st.Stage)
	require.Empty(t, st.Pause.Account, "the task's own limit")
	require.Equal(t, notices+1, st.Pauses, "every pause is still counted as a pause")
}
