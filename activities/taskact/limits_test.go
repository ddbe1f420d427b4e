package taskact

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/limits"
	"karvi-edda-temporal/mapping"
)

const (
	limitEvent  = `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1773158400,"rateLimitType":"five_hour"}}`
	limitResult = `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"You've hit your limit · resets 3:30am (Europe/Moscow)","total_cost_usd":0}`
	plainResult = `{"type":"result","subtype":"success","is_error":false,"result":"done: rate limit exceeded tests fixed","total_cost_usd":0.1}`
)

// A transcript is read in whole lines: a partial last line waits for its
// end, and the mark moves only past whole lines.
func TestReadTranscriptWholeLinesOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "build-1234abcd.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"type":"system"}`+"\n"+limitEvent[:30]), 0o644))
	det := limits.Default()
	mark, v, err := readTranscript(path, TranscriptMark{}, det, time.Now())
	require.NoError(t, err)
	require.False(t, v.Limited)
	require.EqualValues(t, len(`{"type":"system"}`)+1, mark.Offset)

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(limitEvent[30:] + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	mark, v, err = readTranscript(path, mark, det, time.Now())
	require.NoError(t, err)
	require.True(t, v.Limited)
	require.Equal(t, limits.SourceRateLimitEvent, v.Source)
	require.Equal(t, time.Unix(1773158400, 0).UTC(), v.ResetAt)

	// Read again from the new mark: nothing new, no limit.
	_, v, err = readTranscript(path, mark, det, time.Now())
	require.NoError(t, err)
	require.False(t, v.Limited)
}

// The watch reports the first limit with its phase, and skips what the
// cursor says was read already (a resumed run's watch must not meet the
// limit that paused it again); an ordinary result is no limit.
func TestLimitWatcherScan(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) {
		var b []byte
		for _, l := range lines {
			b = append(b, l+"\n"...)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	write("implement-aaaaaaaa.jsonl", limitEvent, limitResult)
	write("test-phase-bbbbbbbb.jsonl", plainResult)
	w := &limitWatcher{det: limits.Default(), dir: dir, cursor: TranscriptCursor{}}
	w.scan(context.Background())
	require.NotNil(t, w.limit)
	require.Equal(t, "implement", w.limit.Phase)
	require.Equal(t, "implement-aaaaaaaa.jsonl", w.limit.Transcript)
	require.False(t, w.limit.Interrupted, "no conductor to interrupt")

	w2 := &limitWatcher{det: limits.Default(), dir: dir, cursor: copyCursor(w.cursor)}
	w2.scan(context.Background())
	require.Nil(t, w2.limit, "a transcript read before is not read again")
	write("implement-cccccccc.jsonl", limitResult)
	w2.scan(context.Background())
	require.NotNil(t, w2.limit)
	require.Equal(t, limits.SourceAPIErrorStatus, w2.limit.Source)

	require.Equal(t, "test-phase", phaseOfTranscript("test-phase-bbbbbbbb.jsonl"))
}

// A phase_failed error that is a limit's message is a limit; a failing
// check that mentions rate limits is not.
func TestPhaseFailedErrorIsReadForALimit(t *testing.T) {
	d := &delivery{limits: &limitWatcher{det: limits.Default(), cursor: TranscriptCursor{}}}
	d.judgeEvent(context.Background(), mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "test",
		Error: "check failed: --- FAIL: TestRetry: expected retry after 5s on 429 Too Many Requests"})
	require.Nil(t, d.limits.limit)
	d.judgeEvent(context.Background(), mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "test",
		Error: "You've hit your usage limit. Upgrade to Pro, or try again at 3:42 PM."})
	require.NotNil(t, d.limits.limit)
	require.Equal(t, "test", d.limits.limit.Phase)
	require.False(t, d.limits.limit.ResetAt.IsZero())
}

// A printed time of day is read against the event's own time: read a few
// seconds late, "try again at" a moment already passed is that moment, not
// the same time tomorrow.
func TestPhaseFailedResetIsReadAtTheEventsTime(t *testing.T) {
	d := &delivery{limits: &limitWatcher{det: limits.Default(), cursor: TranscriptCursor{}}}
	written := time.Now().UTC().Add(-5 * time.Second).Truncate(time.Second)
	reset := written.Add(2 * time.Second)
	d.judgeEvent(context.Background(), mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "implement", TS: written.Format(time.RFC3339Nano),
		Error: "You've hit your usage limit. Upgrade to Pro, or try again at " + reset.Format("3:04:05 PM") + " UTC."})
	require.NotNil(t, d.limits.limit)
	require.Equal(t, reset, d.limits.limit.ResetAt.UTC())
}
