package taskact

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
)

// The tail stores each conductor event as it delivers it; a delivery
// retried from an earlier checkpoint (here: from the start, after a first
// one got halfway) stores nothing twice, and the steps a request carries
// go first.
func TestDeliveryStoresEachEventOnce(t *testing.T) {
	events, err := os.ReadFile("../../testdata/examples/A/events.snake.jsonl")
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	require.NoError(t, os.WriteFile(path, events, 0o644))
	files, err := sink.NewFile(filepath.Join(dir, "sink"))
	require.NoError(t, err)
	a := &Activities{Sink: files, Config: activities.Config{WorkRoot: dir}}
	summary := mapping.PlanSummary{Name: "karvi-t5-020d01", PhaseIDs: []string{"implement", "test", "docs"}, MaxAttempts: 3}
	src := canonical.StepSource("default", "karvi-task-T5", "r1")
	stepCtx := canonical.StepContext{RunID: "run-T5", TaskID: "T5", Source: src}
	started := canonical.FromStep(canonical.Step{Kind: canonical.StepTaskStarted, Seq: 1, TS: time.Unix(0, 0)}, stepCtx)
	ctx := context.Background()
	newDelivery := func() *delivery {
		return &delivery{a: a, explain: func(_ string, _ *int, m string) string { return m },
			brief: mapping.NewBriefState("T5", summary),
			req: DeliverRequest{TaskID: "T5", Plan: PlanInfo{Summary: summary, EventsPath: path},
				Stream: &StreamInfo{RunID: "run-T5", Attempt: 1, Steps: []canonical.Event{started}}}}
	}
	batch, err := tailer.ReadFrom(path, tailer.Cursor{}, maxBatchBytes)
	require.NoError(t, err)
	require.Len(t, batch.Lines, 8)

	first := newDelivery()
	require.NoError(t, first.appendSteps(ctx))
	require.NoError(t, first.take(ctx, tailer.Batch{Lines: batch.Lines[:5], Next: tailer.Cursor{Offset: batch.Lines[5].Offset}}))
	require.Equal(t, activities.StreamCounts{Appended: 6}, first.res.Stream)

	again := newDelivery()
	require.NoError(t, again.appendSteps(ctx))
	require.NoError(t, again.take(ctx, batch))
	require.Equal(t, activities.StreamCounts{Appended: 3, Skipped: 6}, again.res.Stream)

	stored := readStream(t, filepath.Join(activities.DefaultEventsDir(dir), "run-T5.jsonl"))
	require.Len(t, stored, 9)
	require.Equal(t, src+"#seq=1", stored[0].RawRef)
	for i, l := range batch.Lines {
		ev := stored[i+1]
		require.True(t, strings.HasSuffix(ev.RawRef, "#offset="+itoa(l.Offset)), "event %d: %s", i, ev.RawRef)
		require.Equal(t, "task-T5", ev.TaskID)
		require.Equal(t, "plan-karvi-t5-020d01", ev.IntentRef)
	}
	require.Equal(t, canonical.WorkflowAgent, stored[1].ParentAgentID, "the workflow is the conductor's parent")
	require.Equal(t, "conductor", stored[2].ParentAgentID)
}

func readStream(t *testing.T, path string) []canonical.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []canonical.Event
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		ev, err := canonical.Parse([]byte(line))
		require.NoError(t, err)
		_, _, err = canonical.Validate(ev)
		require.NoError(t, err, "stored event %s", line)
		out = append(out, ev)
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestReadEventsActivity(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	dir := t.TempDir()
	a := &Activities{Config: activities.Config{WorkRoot: dir, EventsDir: filepath.Join(dir, "elsewhere")}}
	env.RegisterActivity(a)

	val, err := env.ExecuteActivity(a.ReadEvents, ReadEventsRequest{RunID: "run-T5"})
	require.NoError(t, err)
	var res ReadEventsResult
	require.NoError(t, val.Get(&res))
	require.True(t, res.Missing)

	step := canonical.FromStep(canonical.Step{Kind: canonical.StepTaskStarted, Seq: 1, TS: time.Unix(0, 0)},
		canonical.StepContext{RunID: "run-T5", Source: "temporal://default/workflows/w/r"})
	_, err = a.AppendEvents(context.Background(), AppendRequest{Stream: StreamInfo{RunID: "run-T5", Steps: []canonical.Event{step}}})
	require.NoError(t, err)
	val, err = env.ExecuteActivity(a.ReadEvents, ReadEventsRequest{RunID: "run-T5"})
	require.NoError(t, err)
	require.NoError(t, val.Get(&res))
	require.Len(t, res.Lines, 1)
	require.FileExists(t, filepath.Join(dir, "elsewhere", "run-T5.jsonl"), "the configured directory")

	for _, req := range []ReadEventsRequest{{RunID: "run-T5", Offset: 3}, {RunID: "../T5"}} {
		_, err = env.ExecuteActivity(a.ReadEvents, req)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "%+v: %v", req, err)
		require.Equal(t, ErrBadRead, appErr.Type())
		require.True(t, appErr.NonRetryable())
	}
}
