package taskact

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
)

// busySink is the file sink behind a switch that says when brief writes
// would wait for their turn (as karvi's rate limit does), counting the
// brief writes that reach it.
type busySink struct {
	*sink.File
	busy   atomic.Bool
	writes atomic.Int32
}

func (b *busySink) Congested() bool { return b.busy.Load() }

func (b *busySink) PatchBrief(ctx context.Context, taskID string, body json.RawMessage) error {
	b.writes.Add(1)
	return b.File.PatchBrief(ctx, taskID, body)
}

// holdRig is a delivery of example A's events, appended to its log one
// line at a time so that each line is a batch of its own.
type holdRig struct {
	t     *testing.T
	path  string
	lines []string
	s     *busySink
	a     *Activities
}

func newHoldRig(t *testing.T) *holdRig {
	t.Helper()
	events, err := os.ReadFile("../../testdata/examples/A/events.snake.jsonl")
	require.NoError(t, err)
	dir := t.TempDir()
	files, err := sink.NewFile(filepath.Join(dir, "sink"))
	require.NoError(t, err)
	s := &busySink{File: files}
	path := filepath.Join(dir, "events.jsonl")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	return &holdRig{t: t, path: path, lines: strings.SplitAfter(strings.TrimSpace(string(events)), "\n"),
		s: s, a: &Activities{Sink: s}}
}

func (r *holdRig) delivery() *delivery {
	summary := mapping.PlanSummary{Name: "karvi-t5-020d01", PhaseIDs: []string{"implement", "test", "docs"}}
	return &delivery{a: r.a, explain: func(_ string, _ *int, m string) string { return m },
		brief: mapping.NewBriefState("T5", summary),
		req:   DeliverRequest{TaskID: "T5", Plan: PlanInfo{EventsPath: r.path}, TaskStatus: mapping.TaskInProgress}}
}

// appendLine adds line i to the log and lets d take it as one batch.
func (r *holdRig) appendLine(d *delivery, i int) {
	r.t.Helper()
	f, err := os.OpenFile(r.path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(r.t, err)
	_, err = f.WriteString(strings.TrimSuffix(r.lines[i], "\n") + "\n")
	require.NoError(r.t, err)
	require.NoError(r.t, f.Close())
	batch, err := tailer.ReadFrom(r.path, d.res.Next.tailer(), maxBatchBytes)
	require.NoError(r.t, err)
	require.Len(r.t, batch.Lines, 1)
	require.NoError(r.t, d.take(r.t.Context(), batch))
}

// logActions is the brief's log, one action per entry.
func logActions(t *testing.T, b map[string]any) []string {
	t.Helper()
	var out []string
	for _, e := range b["log"].([]any) {
		out = append(out, e.(map[string]any)["action"].(string))
	}
	return out
}

// While the sink is congested, the patches of events that arrive in
// separate batches are held and merged, not sent at each batch's end: one
// brief write stands for all of them, and it takes the brief exactly where
// the patches one by one would. Once the sink is no longer congested, what
// is held leaves with the next batch, and each event's patch after it
// leaves at once again.
func TestCongestedDeliveryMergesAcrossBatches(t *testing.T) {
	r := newHoldRig(t)
	d := r.delivery()
	ctx := t.Context()
	require.NoError(t, d.patch(ctx, d.enc.Init(&d.brief)))
	require.EqualValues(t, 1, r.s.writes.Load(), "the skeleton leaves at once while not congested")

	r.s.busy.Store(true)
	for i := range 5 {
		r.appendLine(d, i)
	}
	require.EqualValues(t, 1, r.s.writes.Load(),
		"patches of five batches were sent while the sink was congested")

	r.s.busy.Store(false)
	r.appendLine(d, 5)
	require.EqualValues(t, 2, r.s.writes.Load(), "what was held leaves, merged, once the sink is clear")
	r.appendLine(d, 6)
	require.EqualValues(t, 3, r.s.writes.Load(), "an event's patch leaves at once while the sink is clear")
	r.s.busy.Store(true)
	r.appendLine(d, 7)
	require.NoError(t, d.flush(ctx))
	require.EqualValues(t, 4, r.s.writes.Load())

	require.Equal(t, 9, d.res.Patches, "each patch is counted once, merged or not")
	held, err := r.s.CurrentBrief(ctx, "T5")
	require.NoError(t, err)
	require.True(t, mapping.SinkHolds(held, &d.brief.Brief), "the sink holds the brief the events make: %v", held)
	require.Len(t, logActions(t, held), 8, "one log entry per event")
}

// A delivery that dies while it holds patches (the worker crashed) loses
// only what it held: the sink shows one of the states the events made,
// the delivery that resumes from the checkpoint finds which, and sends the
// rest. At every point of the crash the sink's brief ends exactly as the
// events make it, each log entry once, and it never moved backwards.
func TestDeliveryThatDiesHoldingPatchesResumesExactlyOnce(t *testing.T) {
	for crash := 0; crash <= 8; crash++ {
		r := newHoldRig(t)
		first := r.delivery()
		ctx := t.Context()
		require.NoError(t, first.patch(ctx, first.enc.Init(&first.brief)))
		lens := []int{0}
		for i := range crash {
			r.s.busy.Store(i%3 != 2) // held for two batches, sent at the third
			r.appendLine(first, i)
			held, err := r.s.CurrentBrief(ctx, "T5")
			require.NoError(t, err)
			lens = append(lens, len(held["log"].([]any)))
		}
		// The worker dies here: what first held is gone. The rest of the
		// log is written meanwhile.
		for i := crash; i < len(r.lines); i++ {
			f, err := os.OpenFile(r.path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString(strings.TrimSuffix(r.lines[i], "\n") + "\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
		r.s.busy.Store(false)
		again := r.delivery()
		require.NoError(t, again.skipDelivered(ctx), "crash after %d", crash)
		batch, err := tailer.ReadFrom(r.path, again.res.Next.tailer(), maxBatchBytes)
		require.NoError(t, err)
		require.NoError(t, again.take(ctx, batch))
		require.NoError(t, again.flush(ctx))

		held, err := r.s.CurrentBrief(ctx, "T5")
		require.NoError(t, err)
		require.True(t, mapping.SinkHolds(held, &again.brief.Brief), "crash after %d: %v", crash, held)
		require.Len(t, logActions(t, held), 8, "crash after %d: one log entry per event", crash)
		for i := 1; i < len(lens); i++ {
			require.GreaterOrEqual(t, lens[i], lens[i-1], "crash after %d: the brief moved backwards", crash)
		}
	}
}
