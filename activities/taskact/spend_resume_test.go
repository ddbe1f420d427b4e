package taskact

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
)

// A spend patch raises the brief's costs without a log entry of its own,
// so a delivery that resumes after a crash (a retried StartAttempt or
// DeliverEvents) must still recognise the brief it left: the same log, with
// costs at or above what the events alone say. Not recognising it sent the
// skeleton again (the log went back to empty) or delivered again from the
// checkpoint (the log went back to it). The resumed delivery then carries
// the sink's costs on, so no later patch lowers them.
func TestResumeRecognisesABriefRaisedBySpend(t *testing.T) {
	events, err := os.ReadFile("../../testdata/examples/A/events.snake.jsonl")
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	require.NoError(t, os.WriteFile(path, events, 0o644))
	files, err := sink.NewFile(filepath.Join(dir, "sink"))
	require.NoError(t, err)
	summary := mapping.PlanSummary{Name: "karvi-t5-020d01", PhaseIDs: []string{"implement", "test", "docs"}, MaxAttempts: 3}
	newDelivery := func() *delivery {
		return &delivery{a: &Activities{Sink: files}, explain: func(_ string, _ *int, m string) string { return m },
			brief: mapping.NewBriefState("T5", summary),
			req:   DeliverRequest{TaskID: "T5", Plan: PlanInfo{Summary: summary, EventsPath: path}}}
	}
	batch, err := tailer.ReadFrom(path, tailer.Cursor{}, maxBatchBytes)
	require.NoError(t, err)
	evs, _, _ := parseLines(batch.Lines[:4], func(_ string, _ *int, m string) string { return m })

	// What the sink holds: the brief after the first events, then a spend
	// patch from state.json and the transcripts.
	sent := mapping.NewBriefState("T5", summary)
	n := 0
	for _, ev := range evs {
		if _, ok := sent.Reduce(ev); ok {
			n++
		}
	}
	require.Positive(t, n)
	total := 2.5
	_, changed := sent.ApplySpend(mapping.Spend{TotalUSD: &total, ByPhase: map[string]float64{"implement": 1.75}})
	require.True(t, changed)
	held := asHeld(t, &sent.Brief)

	d := newDelivery()
	got, matched, err := d.deliveredIn(held)
	require.NoError(t, err)
	require.True(t, matched, "the brief the delivery left, costs raised by spend, is recognised")
	require.Equal(t, n, got)

	// Skipping those events leaves the delivery at the sink's costs.
	d.skip = got
	for _, ev := range evs {
		require.NoError(t, d.step(t.Context(), ev))
	}
	require.Equal(t, 0, d.skip)
	require.NotNil(t, d.brief.Brief.Cost.TotalUSD)
	require.InDelta(t, 2.5, *d.brief.Brief.Cost.TotalUSD, 1e-9)
	require.InDelta(t, 1.75, d.brief.Brief.Cost.ByPhase["implement"], 1e-9)

	// A brief with a different log is still not ours.
	other := mapping.NewBriefState("T5", summary)
	other.Reduce(evs[0])
	_, matched, err = newDelivery().deliveredIn(asHeld(t, &other.Brief))
	require.NoError(t, err)
	require.True(t, matched, "the state after the first event")
	delete(held, "log")
	_, matched, err = newDelivery().deliveredIn(held)
	require.NoError(t, err)
	require.False(t, matched, "no log, no match")
}

// asHeld is a brief as a sink returns it: decoded JSON.
func asHeld(t *testing.T, b *mapping.Brief) map[string]any {
	t.Helper()
	data, err := json.Marshal(b)
	require.NoError(t, err)
	var held map[string]any
	require.NoError(t, json.Unmarshal(data, &held))
	return held
}
