//go:build realserver

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/testrig"
)

// A task run by two workflows, one after the other (as a run's next loop,
// a redispatch after the end or a schedule's next fire start them, with
// the same workflow id), each pausing once on a usage limit: a receiver
// that skips the delivery ids it has seen still hears both pauses and both
// resumes.
func TestWebhookHearsEveryWorkflowOfATask(t *testing.T) {
	hook := newHookReceiver(t, "hook-secret")
	r := testrig.New(t, testrig.Options{Env: []string{"KARVI_EDDA_NOTIFY_SECRET=hook-secret"},
		WorkerArgs: []string{"-notify-url", hook.srv.URL}})
	r.Workspace("NW1")
	d := testrig.Dispatch(t, "NW1", "Add user authentication with JWT. [sim phase=test limit resets=2s]")
	tuning := &taskapi.Tuning{PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}
	for range 2 {
		res := r.Result(r.StartInput(taskapi.TaskInput{Dispatch: d, Tuning: tuning}))
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, res.Outcome.LastError)
		require.Equal(t, 1, res.Attempt)
	}
	want := []string{"paused", "resumed", "paused", "resumed"}
	require.Eventually(t, func() bool { return len(hook.kinds()) >= len(want) }, 10*time.Second, 50*time.Millisecond,
		"heard %v", hook.kinds())
	require.Equal(t, want, hook.kinds())
}
