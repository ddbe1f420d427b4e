package taskact

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/testkit/karvifake"
)

// boardActivities are fenceActivities writing to a karvifake that holds
// task T5, dispatched, with a brief.
func boardActivities(t *testing.T, conductor string) (*Activities, *testsuite.TestActivityEnvironment, *karvifake.Server) {
	t.Helper()
	fake := karvifake.New(karvifake.Options{RateLimit: karvifake.RateLimitOff})
	require.NoError(t, fake.AddTask(karvifake.Task{ID: "T5", Status: "dispatched", BriefPath: true,
		Brief: json.RawMessage(`{}`)}))
	a, env, _ := fenceActivities(t, "h1")
	if conductor != "" {
		require.NoError(t, os.WriteFile(a.Config.Conductor, []byte(conductor), 0o755))
	}
	a.Sink = karviSink(t, fake)
	return a, env, fake
}

// karviSink is the karvi sink of a worker process of its own, which has
// not seen the board yet: a client keeps its view of the board (and its
// rate limit) per address for the whole process, so each such sink reaches
// the fake at an address of its own.
func karviSink(t *testing.T, fake *karvifake.Server) sink.Sink {
	t.Helper()
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	cl, err := karvi.New(srv.URL, "")
	require.NoError(t, err)
	return sink.NewKarvi(cl)
}

// startAttemptResult runs StartAttempt, which must not fail.
func startAttemptResult(t *testing.T, env *testsuite.TestActivityEnvironment, a *Activities, n int) StartAttemptResult {
	t.Helper()
	v, err := env.ExecuteActivity(a.StartAttempt, StartAttemptRequest{Dispatch: exampleDispatch(t), Attempt: n,
		MaxWait: 10 * time.Millisecond, CheckpointEvery: 10 * time.Millisecond})
	require.NoError(t, err, "the start fails the task's workflow")
	var res StartAttemptResult
	require.NoError(t, v.Get(&res))
	return res
}

// statusWrites are the status writes karvi accepted for T5.
func statusWrites(fake *karvifake.Server) []string {
	var out []string
	for _, w := range fake.Writes("T5") {
		if w.Method == "POST" {
			out = append(out, w.Path)
		}
	}
	return out
}

// A task cancelled on the board before its attempt's first status write
// (the cancel came just after the task was handed to the worker) is not
// run: no conductor starts, karvi's cancel stands, and the start says so
// instead of failing the task's workflow.
func TestStartAttemptOfATaskCancelledOnTheBoardStartsNothing(t *testing.T) {
	a, env, fake := boardActivities(t, "")
	require.NoError(t, fake.SetStatus("T5", "cancelled", "not wanted any more"))
	res := startAttemptResult(t, env, a, 1)
	require.Nil(t, res.Conductor, "a conductor started for a cancelled task")
	require.Contains(t, res.NotRun, "cancelled on the board")
	_, recorded, err := proc.Recorded(res.Plan.RunDir)
	require.NoError(t, err)
	require.False(t, recorded, "a conductor was spawned")
	tk, _ := fake.Task("T5")
	require.Equal(t, "cancelled", tk.Status, "the board's cancel stands")
	require.Empty(t, statusWrites(fake))
}

// A task deleted from the board before its attempt's first status write
// is not run either.
func TestStartAttemptOfADeletedTaskStartsNothing(t *testing.T) {
	a, env, fake := boardActivities(t, "")
	require.True(t, fake.DeleteTask("T5"))
	res := startAttemptResult(t, env, a, 1)
	require.Nil(t, res.Conductor, "a conductor started for a deleted task")
	require.Contains(t, res.NotRun, "no longer exists")
	_, recorded, err := proc.Recorded(res.Plan.RunDir)
	require.NoError(t, err)
	require.False(t, recorded, "a conductor was spawned")
}

// A conductor that writes nothing until it is stopped.
const silentConductor = `#!/bin/sh
while :; do sleep 1; done
`

// The start of an attempt whose conductor an earlier try already spawned
// (and which has written nothing yet), cancelled on the board since, meets
// the cancel at the status write: the conductor is stopped, nothing of the attempt is left
// running, and the attempt is not run.
func TestStartAttemptCancelledAfterAnEarlierTrySpawnedStopsTheConductor(t *testing.T) {
	a, env, fake := boardActivities(t, silentConductor)
	first := startAttemptResult(t, env, a, 1)
	require.NotNil(t, first.Conductor, first.StartError)
	require.NoError(t, fake.SetStatus("T5", "cancelled", "not wanted any more"))

	// The start is tried again on another worker of the same host (the
	// first died before its first checkpoint), whose view of the board is
	// fresh.
	a.Sink = karviSink(t, fake)
	again := startAttemptResult(t, env, a, 1)
	require.Nil(t, again.Conductor)
	require.Contains(t, again.NotRun, "cancelled on the board")
	st, err := proc.Inspect(first.Conductor.proc())
	require.NoError(t, err)
	require.False(t, st.Alive || st.GroupAlive, "the earlier try's conductor was left running")
	live, err := a.LiveRuns("T5")
	require.NoError(t, err)
	require.Empty(t, live)
	tk, _ := fake.Task("T5")
	require.Equal(t, "cancelled", tk.Status, "the board's cancel stands")
}
