//go:build realserver

package faults

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// karvi's token is rotated while the worker is down: the delivery retried
// after the crash finds every request refused (401) from its first one,
// the read of the brief that tells it what the sink already holds. That
// refusal must be recorded and gone past, as an ordinary delivery does:
// the task follows its conductor to the end and ends, and no conductor is
// left running without a workflow.
func TestTokenRotatedBetweenKillAndRetry(t *testing.T) {
	// Early, the retry is the attempt's start (its first delivery runs
	// about a second); later, an ordinary delivery.
	for _, c := range []struct {
		name    string
		entries int
	}{{"start", 2}, {"deliver", 10}} {
		t.Run(c.name, func(t *testing.T) { rotateBetweenKillAndRetry(t, c.entries) })
	}
}

func rotateBetweenKillAndRetry(t *testing.T, entries int) {
	var rotated atomic.Bool
	r := newRig(t, testrig.Options{Sink: "karvi", KarviWrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if rotated.Load() {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":"invalid token"}`))
				return
			}
			h.ServeHTTP(w, req)
		})
	}})
	const id = "ROT1"
	r.Workspace(id)
	r.AddKarviTask(id)
	run := r.Start(testrig.Dispatch(t, id, "Rotated token. [sim checks=pass] "+
		"[sim phase=implement events=15 delay=5s] [sim phase=test events=15 delay=15s] [sim phase=docs events=5 delay=1s]"))
	// Kill once the tail delivers: a PATCH just reached karvi and the
	// workflow has not heard of it, so the retry must read the brief.
	wait.EventuallyEvery(t, 60*time.Second, 5*time.Millisecond, "an event to reach karvi", func() (any, bool) {
		log, _ := r.KarviBrief(id)["log"].([]any)
		return fmt.Sprintf("%d log entries, want %d", len(log), entries), len(log) >= entries
	})
	require.NoError(t, r.KillWorker())
	rotated.Store(true)
	r.StartWorker()

	_, err := r.ResultErr(run)
	// The final status cannot be written with a rotated token: the task
	// ends failed on it, but only once its conductor is done.
	if err != nil {
		require.Contains(t, err.Error(), "status could not be written")
	}
	// The conductor ran its plan to the end (it exits a moment after its
	// last event), instead of being left running by a failed workflow.
	wait.Eventually(t, 5*time.Second, "the conductor to exit after the task ended", func() (any, bool) {
		live := r.LiveConductors()
		return live, len(live) == 0
	})
	st, qerr := r.Status(id)
	require.NoError(t, qerr)
	require.Contains(t, st.SinkProblem, "401")
}
