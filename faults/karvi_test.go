//go:build realserver

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/testkit/testrig"
)

// examplePatches is the PATCH sequence of an undisturbed run of example A
// for another task and plan name: the skeleton, then one PATCH per event,
// normalized.
func examplePatches(t *testing.T, taskID, planName string) []any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testrig.ExampleDir(t), "init_patch.json"))
	require.NoError(t, err)
	init := testrig.NormalizeBrief(t, data)
	init["meta"].(map[string]any)["taskId"] = taskID
	init["plan"].(map[string]any)["name"] = planName
	out := []any{init}
	for _, p := range testrig.ExamplePatches(t) {
		if plan, ok := p["plan"].(map[string]any); ok {
			plan["name"] = planName
		}
		out = append(out, testrig.Normalize(p))
	}
	return out
}

// collapseRetries drops a body that repeats the one before it byte for
// byte: a retry of a PATCH whose answer was lost. What remains must be the
// expected sequence exactly; any other repeat would move the brief
// backwards while it is read.
func collapseRetries(bodies []json.RawMessage) (kept []json.RawMessage, retries int) {
	for i, b := range bodies {
		if i > 0 && bytes.Equal(b, bodies[i-1]) {
			retries++
			continue
		}
		kept = append(kept, b)
	}
	return kept, retries
}

// logLengths shows a PATCH sequence compactly: each body's log length.
func logLengths(t *testing.T, bodies []json.RawMessage) []int {
	t.Helper()
	out := make([]int, len(bodies))
	for i, b := range bodies {
		var v struct{ Log []any }
		require.NoError(t, json.Unmarshal(b, &v))
		out[i] = len(v.Log)
	}
	return out
}

func decodeAll(t *testing.T, bodies []json.RawMessage) []any {
	t.Helper()
	out := make([]any, len(bodies))
	for i, b := range bodies {
		var v any
		require.NoError(t, json.Unmarshal(b, &v))
		out[i] = testrig.Normalize(v)
	}
	return out
}

// waitPatches waits until karvi has accepted at least n brief PATCHes for
// the task.
func (r *rig) waitPatches(ctx context.Context, taskID string, n int) {
	r.T().Helper()
	for len(r.KarviPatches(taskID)) < n {
		_, err := r.Karvi.WaitWrites(ctx, taskID, len(r.Karvi.Writes(taskID))+1)
		require.NoError(r.T(), err, "waiting for PATCH %d of %s", n, taskID)
	}
}

// karvi refuses connections for 30 s (its port closed), then answers 503,
// then is healthy. Events the conductor writes meanwhile wait in the
// workflow: no PATCH is lost, none arrives out of order (a repeat is only
// ever an exact retry of the PATCH just before), the brief ends complete and
// the task completed.
func TestKarviOutageThen503(t *testing.T) {
	r := newRig(t, testrig.Options{Sink: "karvi"})
	const id = "OUTAGE1"
	r.Workspace(id)
	run := r.Start(testrig.Dispatch(t, id, exampleMessage(1500, 300, 300, "")))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Down once the skeleton and plan_start are in: the phases' PATCHes
	// and the status changes must then wait out the outage. The PATCH of
	// an event in plan_start's batch may still get in before the port
	// closes; that is a race of this test, not part of the fault.
	r.waitPatches(ctx, id, 2)
	plan := r.PlanName(id, 1) // its run directory exists now
	require.NoError(t, r.Karvi.SetDown(true))
	down := time.Now()
	// The outage is the fault itself, not a wait for an event: the
	// conductor finishes the whole plan meanwhile and the workflow keeps
	// retrying against a closed port.
	time.Sleep(30 * time.Second)
	require.True(t, hasEvent(r.EventsPath(id, plan), "plan_completed", ""),
		"the conductor finished during the outage, so every later PATCH had to wait")
	for _, w := range r.Karvi.Writes(id) {
		require.False(t, w.At.After(down), "%s %s reached karvi while it was down", w.Method, w.Path)
	}

	// Back on the same port, but the first two writes get 503. The
	// conductor has finished, so the rest of its events reach the workflow
	// as one batch of PATCHes; two more 503s land inside that batch, right
	// after its second PATCH: a retry must not send the batch's first
	// PATCHes again after newer ones (karvi's brief would move backwards).
	// The latency is karvi's per-request delay, which it waits before it
	// looks at FailNext; arming FailNext as soon as a write is recorded is
	// therefore in time for the next request.
	r.Karvi.SetLatency(50 * time.Millisecond)
	r.Karvi.FailNext(2, http.StatusServiceUnavailable)
	require.NoError(t, r.Karvi.SetDown(false))
	for {
		ls := logLengths(t, r.KarviPatches(id))
		if ls[len(ls)-1] >= 4 { // phase_start test: the backlog batch's second PATCH
			r.Karvi.FailNext(2, http.StatusServiceUnavailable)
			break
		}
		_, err := r.Karvi.WaitWrites(ctx, id, len(r.Karvi.Writes(id))+1)
		require.NoError(t, err)
	}
	t.Logf("karvi down %s, then 2 answers 503, then 2 more inside the backlog", time.Since(down).Round(time.Second))

	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, "completed", r.KarviStatus(id))
	require.Equal(t, testrig.ExampleBriefFor(t, id, plan), r.KarviBrief(id), "final brief complete")
	logPerEvent(t, r.KarviBrief(id), r.singleRun(id, plan))

	all := r.KarviPatches(id)
	t.Logf("accepted PATCHes by log length: %v", logLengths(t, all))
	kept, retries := collapseRetries(all)
	require.Equal(t, examplePatches(t, id, plan), decodeAll(t, kept),
		"PATCHes karvi accepted, exact retries collapsed: none lost, none out of order")
	t.Logf("%d PATCHes accepted, %d of them exact retries", len(kept)+retries, retries)

	var statuses []string
	for _, w := range r.Karvi.Writes(id) {
		// The last step rides with the dispatch result on /update.
		if strings.HasSuffix(w.Path, "/status") || strings.HasSuffix(w.Path, "/update") {
			var b struct{ Status string }
			require.NoError(t, json.Unmarshal(w.Body, &b))
			if b.Status != "" {
				statuses = append(statuses, b.Status)
			}
		}
	}
	require.Equal(t, []string{"in_progress", "completed"}, statuses, "status writes in order, each once")
	r.AssertNoOrphans()
}
