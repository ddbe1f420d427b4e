package taskact

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/mapping"
)

func TestCheckpointClock(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	cases := []struct {
		name     string
		lines    []int // when lines were delivered, ms after the start
		boundary int   // the line at which a phase boundary was read (index+1; 0 none)
		now      int
		progress bool
		want     time.Duration
	}{
		{"no progress: only MaxWait bounds the call", nil, 0, 3000, false, ms(17000)},
		{"no progress past MaxWait: report the silence", nil, 0, 21000, false, ms(-1000)},
		{"progress, not yet due", []int{100}, 0, 1000, true, ms(4000)},
		{"due, nothing since: wait for the next burst up to twice the interval", []int{100}, 0, 5000, true, ms(5000)},
		{"due, a burst after due: take it when the log is quiet", []int{100, 6000}, 0, 6005, true, ms(15)},
		{"due, quiet after the burst: now", []int{100, 6000}, 0, 6020, true, 0},
		{"a log that never stops: twice the interval", []int{100, 9990}, 0, 9995, true, ms(5)},
		{"a phase boundary before due: when the burst ends", []int{100, 1000}, 2, 1005, true, ms(15)},
		{"a phase boundary, quiet after it: now", []int{100, 1000}, 2, 1020, true, 0},
		{"a boundary in a log that never stops: within a second", []int{100, 1000, 1990}, 2, 1995, true, ms(5)},
		{"lines after the boundary's checkpoint was due: when quiet", []int{100, 1000, 1010}, 2, 1015, true, ms(15)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cp := newCheckpointClock(t0, 5*time.Second, 20*time.Second)
			for i, l := range c.lines {
				cp.line(at(l))
				if i+1 == c.boundary {
					cp.boundary()
				}
			}
			require.Equal(t, c.want, cp.wait(at(c.now), c.progress))
		})
	}
}

// A delivery that starts where an earlier one may have gone further finds
// exactly how many patches the sink holds, whatever the earlier one got to:
// none, the skeleton only, some events, all of them.
func TestDeliveredFindsWhatTheSinkHolds(t *testing.T) {
	events, err := os.ReadFile("../../testdata/examples/A/events.snake.jsonl")
	require.NoError(t, err)
	summary := mapping.PlanSummary{Name: "karvi-t5-020d01", PhaseIDs: []string{"implement", "test", "docs"}}
	ctx := context.Background()
	for sent := -1; sent <= 8; sent++ { // -1: not even the skeleton
		dir := t.TempDir()
		path := filepath.Join(dir, "events.jsonl")
		require.NoError(t, os.WriteFile(path, events, 0o644))
		files, err := sink.NewFile(filepath.Join(dir, "sink"))
		require.NoError(t, err)
		a := &Activities{Sink: files}
		newDelivery := func() *delivery {
			return &delivery{a: a, explain: func(_ string, _ *int, m string) string { return m },
				brief: mapping.NewBriefState("T5", summary),
				req:   DeliverRequest{TaskID: "T5", Plan: PlanInfo{EventsPath: path}}}
		}
		first := newDelivery()
		if sent >= 0 {
			require.NoError(t, first.patch(ctx, first.enc.Init(&first.brief)))
			batch, err := tailer.ReadFrom(path, tailer.Cursor{}, maxBatchBytes)
			require.NoError(t, err)
			evs, _, _ := parseLines(batch.Lines, first.explain)
			for _, ev := range evs[:sent] {
				require.NoError(t, first.step(ctx, ev))
			}
		}

		n, matched, err := newDelivery().delivered(ctx)
		require.NoError(t, err)
		require.Equal(t, sent >= 0, matched, "after %d events", sent)
		require.Equal(t, max(sent, 0), n, "after %d events", sent)
	}
}

// A delivery the workflow gives no checkpoint cadence takes the default at
// the worker's time scale; the workflow's own is used as given.
func TestCheckpointEveryFollowsTheTimeScale(t *testing.T) {
	for _, tc := range []struct {
		scale timescale.Scale
		req   time.Duration
		want  time.Duration
	}{
		{0, 0, 10 * time.Minute},
		{60, 0, 10 * time.Second},
		{60, 3 * time.Second, 3 * time.Second},
	} {
		d := &delivery{a: &Activities{Config: activities.Config{Scale: tc.scale}}, req: DeliverRequest{CheckpointEvery: tc.req}}
		require.Equal(t, tc.want, d.checkpointEvery(), "scale %v, asked %s", tc.scale, tc.req)
	}
	require.Equal(t, 5*time.Second, activities.Config{Scale: 60}.TailHeartbeatOrDefault(),
		"a scaled tail heartbeat keeps room for a few heartbeats")
	require.Equal(t, 30*time.Second, activities.Config{Scale: 2}.TailHeartbeatOrDefault())
	require.Equal(t, time.Minute, activities.Config{}.TailHeartbeatOrDefault())
	require.Equal(t, 7*time.Second, activities.Config{Scale: 60, TailHeartbeat: 7 * time.Second}.TailHeartbeatOrDefault())
}
