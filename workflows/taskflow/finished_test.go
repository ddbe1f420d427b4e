package taskflow

import (
	"karvi-edda-temporal/api/task"
	"testing"

	"github.com/stretchr/testify/require"
)

// A task redispatched very often keeps a bounded record of its finished
// attempts: every summary travels in each continue-as-new input, the
// status query and the result. The oldest fold into a total that keeps
// what they spent, so the task's budget still counts every attempt.
func TestFinishedAttemptsStayBounded(t *testing.T) {
	var st State
	var want float64
	for n := 1; n <= 3*maxFinished; n++ {
		cost := 0.25
		want += cost
		st.addFinished(taskapi.AttemptSummary{Attempt: n, Ended: taskapi.EndedRedispatched, Events: 2, CostUSD: &cost})
	}
	require.Len(t, st.Finished, maxFinished)
	require.Equal(t, 3*maxFinished, st.Finished[len(st.Finished)-1].Attempt, "the latest are kept")
	require.Equal(t, 2*maxFinished, st.Earlier.Attempts)
	require.Equal(t, 4*maxFinished, st.Earlier.Events)
	require.InDelta(t, want, st.finishedSpent(0, 0), 1e-9, "what every finished attempt spent")
	require.InDelta(t, want-0.25, st.finishedSpent(0, 3*maxFinished), 1e-9, "the current attempt is left out")
}
