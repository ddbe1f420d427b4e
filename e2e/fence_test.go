//go:build realserver

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// The worker's fence sweeps its live conductors every minute, stopping
// those whose task's workflow moved on. A conductor resumed after a
// usage-limit pause runs in a run directory of its own, and is still its
// task's current attempt: a resumed phase that outlives several sweeps
// runs on and completes. The sweep runs every 200 ms here, and the resumed
// phase's check waits until the worker has kept the resumed conductor
// through three sweeps.
func TestResumedPhaseOutlivesTheFencesSweeps(t *testing.T) {
	r := testrig.New(t, testrig.Options{Env: []string{"KARVI_EDDA_FENCE_EVERY=200ms"}})
	gate := filepath.Join(r.Dir, "gate")
	// The test phase's check (`cargo test`, a stub on the worker's PATH)
	// holds the phase until the gate opens; a test that fails opens it too,
	// so the check does not outlive it.
	require.NoError(t, os.WriteFile(filepath.Join(r.Dir, "stubs", "cargo"),
		[]byte("#!/bin/sh\nwhile [ ! -e '"+gate+"' ]; do sleep 0.05; done\n"), 0o755))
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	r.Workspace("T46")
	d := testrig.Dispatch(t, "T46", "Add user authentication with JWT. [sim phase=implement limit resets=1s]")
	run := r.StartInput(taskapi.TaskInput{Dispatch: d, Tuning: &taskapi.Tuning{
		PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}})

	logs := func() string {
		var all strings.Builder
		for _, p := range r.WorkerLogs() {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			all.Write(data)
		}
		return all.String()
	}
	kept := func(log string) int {
		n := 0
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, `msg="fence: keeping a live conductor"`) && strings.Contains(line, "-resume-1") {
				n++
			}
		}
		return n
	}
	wait.Eventually(t, 2*time.Minute, "three sweeps keeping the resumed conductor", func() (any, bool) {
		log := logs()
		if i := strings.Index(log, "fence: stopped a conductor"); i >= 0 {
			end := strings.IndexByte(log[i:], '\n')
			if end < 0 {
				end = len(log) - i
			}
			res := r.Result(run)
			t.Fatalf("the fence stopped a conductor: %s\nthe task ended %s: %s", log[i:i+end],
				res.Outcome.TaskStatus, res.Outcome.LastError)
		}
		return kept(log), kept(log) >= 3
	})
	require.NoError(t, os.WriteFile(gate, nil, 0o644))

	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, "last error: %s", res.Outcome.LastError)
	require.Equal(t, 1, res.Attempt, "a pause is not an attempt")
	require.Equal(t, r.PlanName("T46", 1), res.PlanName, "the same plan continued")
	st, err := r.Status("T46")
	require.NoError(t, err)
	require.Equal(t, 1, st.Pauses)
	resumed, err := filepath.Glob(filepath.Join(r.WorkRoot, "runs", "T46", res.PlanName+"-resume-*"))
	require.NoError(t, err)
	require.Len(t, resumed, 1, "one resumed conductor")
	require.NotContains(t, logs(), "fence: stopped a conductor")
}
