package taskact

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/limits"
	"karvi-edda-temporal/stalls"
)

func stallDelivery(t *testing.T, req DeliverRequest, cfg activities.Config) *delivery {
	t.Helper()
	req.WatchLimits, req.MaxWait = true, 20*time.Second
	req.Plan.Summary.TimeoutSec = 60
	d := &delivery{a: &Activities{Config: cfg}, req: req,
		limits: &limitWatcher{det: limits.Default(), dir: t.TempDir(), cursor: TranscriptCursor{}}}
	d.brief.Brief.CurrentPhase = "implement"
	return d
}

// The watch runs with the dispatch's threshold, else the worker's when it
// is shorter than the phase timeout; not at all when the workflow did not
// ask for it or the delivery is a drain.
func TestStallWatchThreshold(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	d := stallDelivery(t, DeliverRequest{StallWatch: StallWatch{WatchStalls: true, StallAfter: 5 * time.Second, OnStall: "abort"}},
		activities.Config{StallAfter: 30 * time.Second, OnStall: stalls.Redispatch})
	s := d.newStallWatch(now)
	require.NotNil(t, s)
	require.Equal(t, 5*time.Second, s.after)
	require.Equal(t, stalls.Abort, s.action)
	require.Equal(t, now, s.progress, "no checkpoint yet: the clock starts now")

	d = stallDelivery(t, DeliverRequest{StallWatch: StallWatch{WatchStalls: true}}, activities.Config{StallAfter: 30 * time.Second, OnStall: stalls.Redispatch})
	s = d.newStallWatch(now)
	require.Equal(t, 30*time.Second, s.after)
	require.Equal(t, stalls.Redispatch, s.action)

	d = stallDelivery(t, DeliverRequest{StallWatch: StallWatch{WatchStalls: true}}, activities.Config{StallAfter: 15 * time.Minute})
	require.Nil(t, d.newStallWatch(now), "the phase timeout of 60s comes before the worker's 15m")

	d = stallDelivery(t, DeliverRequest{StallWatch: StallWatch{StallAfter: 5 * time.Second}}, activities.Config{})
	require.Nil(t, d.newStallWatch(now), "not asked for")
	d = stallDelivery(t, DeliverRequest{StallWatch: StallWatch{WatchStalls: true, StallAfter: 5 * time.Second}}, activities.Config{})
	d.req.MaxWait = 0
	require.Nil(t, d.newStallWatch(now), "a drain watches nothing")
}

// No event and no transcript line for the threshold is a stall, reported
// once with its phase; a transcript line, like an event, is progress; a
// reported stall ends the call as soon as progress resumes.
func TestStallWaitReportsAStallOnceAndItsEnd(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	ctx := context.Background()
	d := stallDelivery(t, DeliverRequest{StallWatch: StallWatch{WatchStalls: true, StallAfter: 5 * time.Second, ProgressAt: t0}}, activities.Config{})
	s := d.newStallWatch(t0)

	wait, goOn := d.stallWait(ctx, s, t0.Add(2*time.Second), 20*time.Second)
	require.True(t, goOn)
	require.Equal(t, 3*time.Second, wait, "the wait ends when the threshold passes")

	s.line(t0.Add(3 * time.Second))
	wait, goOn = d.stallWait(ctx, s, t0.Add(4*time.Second), 20*time.Second)
	require.True(t, goOn)
	require.Equal(t, 4*time.Second, wait, "an event line moves the clock")

	wait, goOn = d.stallWait(ctx, s, t0.Add(8*time.Second), 20*time.Second)
	require.False(t, goOn)
	require.Zero(t, wait)
	require.Equal(t, &Stall{Phase: "implement", Since: t0.Add(3 * time.Second).UTC(), SeenAt: t0.Add(8 * time.Second).UTC(),
		After: 5 * time.Second, Action: stalls.Warn}, d.res.Stall)
	d.endStallWatch(s)
	require.True(t, d.res.Stalled)
	require.Equal(t, t0.Add(3*time.Second).UTC(), d.res.ProgressAt)

	// The next call, with the stall reported: it looks at the transcripts
	// every second and returns once one grows.
	d2 := stallDelivery(t, DeliverRequest{StallWatch: StallWatch{WatchStalls: true, StallAfter: 5 * time.Second,
		ProgressAt: d.res.ProgressAt, Stalled: true}}, activities.Config{})
	s2 := d2.newStallWatch(time.Now())
	wait, goOn = d2.stallWait(ctx, s2, time.Now(), 20*time.Second)
	require.True(t, goOn)
	require.Equal(t, stallRecheck, wait)
	require.Nil(t, d2.res.Stall, "a stall under way is not reported again")
	require.NoError(t, os.WriteFile(filepath.Join(d2.limits.dir, "implement-aaaaaaaa.jsonl"), []byte(`{"type":"assistant"}`+"\n"), 0o644))
	d2.limits.scan(ctx)
	_, goOn = d2.stallWait(ctx, s2, time.Now(), 20*time.Second)
	require.False(t, goOn, "progress again: a checkpoint")
	d2.endStallWatch(s2)
	require.True(t, d2.res.ProgressAt.After(d.res.ProgressAt))
	require.Nil(t, d2.res.Stall)
}

// A transcript that did not grow, or grew by a partial line only, is no
// progress.
func TestTranscriptProgressIsAWholeLine(t *testing.T) {
	dir := t.TempDir()
	w := &limitWatcher{det: limits.Default(), dir: dir, cursor: TranscriptCursor{}}
	path := filepath.Join(dir, "build-aaaaaaaa.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"type":"system"}`+"\n"), 0o644))
	w.scan(context.Background())
	first := w.progress
	require.False(t, first.IsZero())
	w.scan(context.Background())
	require.Equal(t, first, w.progress)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"type":"assis`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	w.scan(context.Background())
	require.Equal(t, first, w.progress)
}

// A stall under way is looked at again at the worker's time scale, never
// more often than the transcripts are read.
func TestStallRecheckFollowsTheTimeScale(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		scale timescale.Scale
		want  time.Duration
	}{{0, time.Second}, {1, time.Second}, {4, 250 * time.Millisecond}, {60, limitPoll}} {
		d := stallDelivery(t, DeliverRequest{StallWatch: StallWatch{WatchStalls: true, StallAfter: 5 * time.Second,
			ProgressAt: t0, Stalled: true}}, activities.Config{Scale: tc.scale})
		wait, goOn := d.stallWait(context.Background(), d.newStallWatch(t0), t0, 20*time.Second)
		require.True(t, goOn)
		require.Equal(t, tc.want, wait, "scale %v", tc.scale)
	}
}
