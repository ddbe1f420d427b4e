package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/mapping"
)

func TestJobCommandLine(t *testing.T) {
	inv, err := parseArgs([]string{"job", "T5", "-report", "-address", "a:1"})
	require.NoError(t, err)
	require.Equal(t, "job", inv.cmd.name)
	require.True(t, inv.opts.(*jobOpts).report)
	require.Equal(t, "T5", inv.arg)
	inv, err = parseArgs([]string{"job", "T5"})
	require.NoError(t, err)
	require.False(t, inv.opts.(*jobOpts).report)
}

// The JSON is the job in snake_case with its tagged states; the report
// starts with the verdict's line.
func TestWriteJob(t *testing.T) {
	tl := jobview.NewTally(jobview.Seed{PhaseIDs: []string{"implement"}})
	tl.Observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "implement", Attempt: 1})
	start := time.Date(2026, 2, 28, 3, 0, 0, 0, time.UTC)
	j := jobview.BuildJob(jobview.JobInput{ID: "T5", SpecID: "disp_001", PlanID: "karvi-t5-020d01", MaxAttempts: 3,
		CreatedAt: start, UpdatedAt: start.Add(time.Second),
		Attempts: []jobview.AttemptInput{{Number: 1, ID: "karvi-t5-020d01", StartedAt: start, Tally: tl}}})

	var out bytes.Buffer
	require.NoError(t, writeJob(&out, j, false))
	var raw map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &raw))
	require.Equal(t, map[string]any{"status": "executing", "attempt": 1.0, "step": "implement"}, raw["state"])
	attempt := raw["attempts"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"status": "in_progress"}, attempt["result"])
	require.Nil(t, attempt["finished_at"])
	require.Equal(t, "disp_001", raw["spec_id"])

	out.Reset()
	require.NoError(t, writeJob(&out, j, true))
	first, _, _ := strings.Cut(out.String(), "\n")
	require.Equal(t, "0 passed, 0 failed, 0 total in 0ms", first)
	require.Contains(t, out.String(), "job T5 executing implement (attempt 1)")
}
