package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/intake"
)

func TestIntakeStatusArgs(t *testing.T) {
	inv, err := parseArgs([]string{"intake", "status", "-board", "http://karvi.example:3461", "-json"})
	require.NoError(t, err)
	require.Equal(t, "intake status", inv.cmd.name)
	require.Equal(t, "http://karvi.example:3461", inv.opts.(*intakeOpts).board)
	require.True(t, inv.opts.(*intakeOpts).json)
	_, err = parseArgs([]string{"intake", "status", "T1"})
	require.ErrorContains(t, err, "takes no argument")
}

// The view says what is followed, the problem, what was claimed, skipped
// and why, and what was done last.
func TestPrintIntake(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := intakeapi.Status{BoardURL: "http://k:3461", RuntimeHint: "edda", TaskQueue: "karvi-edda", Version: 42,
		Problem: "karvi http://k:3461: unauthorized",
		Claims: []intake.Claim{{TaskID: "T1", Phase: intake.PhaseEnded, Attempt: 1, Final: "completed"},
			{TaskID: "T2", Phase: intake.PhaseRefused, Attempt: 1, Reason: "task T2: title: required"}},
		Skipped: []intakeapi.Note{{Kind: intake.KindIgnore, TaskID: "T9", Reason: "cancelled on a task routed to \"openclaw\", not \"edda\""}},
		Recent:  []intakeapi.Note{{Kind: intake.KindStart, TaskID: "T1", Result: "started karvi-task-T1 run r1 (attempt 1)", At: at}},
		Counts:  intakeapi.Counts{Started: 1, Blocked: 1}}
	var b bytes.Buffer
	require.NoError(t, printIntake(&b, "karvi-intake-k-3461", st))
	out := b.String()
	for _, want := range []string{
		"intake karvi-intake-k-3461", `follows  http://k:3461 (runtimeHint "edda")`, "_version 42",
		"PROBLEM  karvi http://k:3461: unauthorized", "started 1, redispatched 0, aborted 0, blocked 1",
		"T1    ended    1        completed  karvi-task-T1",
		"T2    refused  1        -          karvi-task-T2  task T2: title: required",
		`task T9: cancelled on a task routed to "openclaw", not "edda"`,
		"03:04:05 start task T1: started karvi-task-T1 run r1 (attempt 1)",
	} {
		require.Contains(t, out, want)
	}
}
