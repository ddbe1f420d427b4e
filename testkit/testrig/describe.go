//go:build realserver

package testrig

import (
	"context"
	"karvi-edda-temporal/api/task"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// What a person sees of a task in the Web UI, read as the UI reads it: the
// summary and details fixed at start, the current details behind the
// workflow's metadata query, and the summaries activities leave in history.

// StartAsStarter starts a task workflow as the starter does, with the
// static summary and details the Web UI shows (every start through
// taskapi.Tasks sets them, Start's too).
func (r *Rig) StartAsStarter(in taskapi.TaskInput) client.WorkflowRun {
	r.t.Helper()
	return r.StartInput(in)
}

// CurrentDetails are the current details of a task's workflow, from the
// metadata query the Web UI sends.
func (r *Rig) CurrentDetails(taskID string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := r.currentDetails(ctx, taskID)
	require.NoError(r.t, err)
	return d
}

func (r *Rig) currentDetails(ctx context.Context, taskID string) (string, error) {
	var md sdkpb.WorkflowMetadata
	if err := r.Tasks().Query(ctx, taskID, "", "__temporal_workflow_metadata", &md); err != nil {
		return "", err
	}
	return md.GetCurrentDetails(), nil
}

// WaitDetails polls the current details until cond holds. The workflow
// renders them at its checkpoints, so they lag the conductor (and the
// sink) by up to one checkpoint; the deadline is a safety net against a
// hung test, and on it the test fails with the last details seen.
func (r *Rig) WaitDetails(taskID, what string, cond func(string) bool) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	var lastErr error
	for {
		qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
		d, err := r.currentDetails(qctx, taskID)
		qcancel()
		if err == nil && cond(d) {
			return d
		}
		last, lastErr = d, err
		select {
		case <-ctx.Done():
			r.t.Fatalf("task %s: details never showed %s: %v (last details %q, last query error %v)",
				taskID, what, ctx.Err(), last, lastErr)
			return ""
		case <-tick.C:
		}
	}
}

// ActivitySummaries are the summaries of the activities and local
// activities (markers) in a history, in order.
func ActivitySummaries(t testing.TB, h *historypb.History) []string {
	t.Helper()
	var out []string
	for _, ev := range h.GetEvents() {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_MARKER_RECORDED:
		default:
			continue
		}
		p := ev.GetUserMetadata().GetSummary()
		if p == nil {
			continue
		}
		var s string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &s),
			"summary of event %d", ev.GetEventId())
		out = append(out, s)
	}
	return out
}

// ActivityTypes counts the activities a history scheduled, by type.
func ActivityTypes(h *historypb.History) map[string]int {
	out := map[string]int{}
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			out[a.GetActivityType().GetName()]++
		}
	}
	return out
}
