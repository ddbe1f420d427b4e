package taskflow

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/sink"
)

// mergedSink is the brief the fake's patches make, merged as karvi merges
// a PATCH: objects key by key, everything else replaced.
type mergedSink struct{ f *fakeConductor }

func merge(dst map[string]any, patch map[string]any) {
	for k, v := range patch {
		if pm, ok := v.(map[string]any); ok {
			dm, ok := dst[k].(map[string]any)
			if !ok {
				dm = map[string]any{}
			}
			merge(dm, pm)
			dst[k] = dm
			continue
		}
		dst[k] = v
	}
}

func (s mergedSink) CurrentBrief(context.Context, string) (map[string]any, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	held := map[string]any{}
	for _, p := range s.f.patches {
		var m map[string]any
		if err := json.Unmarshal(p, &m); err != nil {
			return nil, err
		}
		merge(held, m)
	}
	return held, nil
}

func (mergedSink) PatchBrief(context.Context, string, json.RawMessage) error  { return nil }
func (mergedSink) SetStatus(context.Context, string, sink.StatusUpdate) error { return nil }

// A delivery on a host that is then lost sent patches past the workflow's
// last checkpoint. The patch that settles the attempt's brief must keep
// them: it starts from what the sink holds of this attempt, not from the
// checkpoint, or the sink's log moves backwards and, when the attempt's
// end is final, loses those entries for good.
func TestSettleAfterHostLossKeepsWhatWasDelivered(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 2,
		hostOf: func(n int) string { return map[int]string{1: "h2", 2: "h1"}[n] }}
	deliveries := 0
	f.afterDeliver = func() error {
		deliveries++
		if deliveries == 1 { // delivered, then its host was lost
			return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		}
		return nil
	}
	f.register(env)
	real := &taskact.Activities{Sink: mergedSink{f}}
	env.OnActivity(acts.CatchUpBrief, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req taskact.CatchUpRequest) (taskact.CatchUpResult, error) {
			return real.CatchUpBrief(ctx, req)
		}).Maybe()
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())

	logOf := func(body []byte) []any {
		var m struct{ Log []any }
		require.NoError(t, json.Unmarshal(body, &m))
		return m.Log
	}
	n := 0
	var before []any
	for _, entry := range f.timeline {
		if !strings.HasPrefix(entry, "patch ") {
			continue
		}
		if entry == "patch settle" {
			settled := logOf(f.patches[n])
			require.Greater(t, len(settled), len(before), "the settle patch moved the log backwards")
			require.Equal(t, before, settled[:len(before)], "the settle patch lost delivered entries")
			return
		}
		before = logOf(f.patches[n])
		n++
	}
	t.Fatalf("no settle patch: %v", f.timeline)
}
