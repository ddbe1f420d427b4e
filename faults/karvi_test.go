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

	"karvi-edda-temporal/mapping"
)

// seedPatches is the PATCH sequence of an undisturbed run of seed example A
// for another task and plan name: the skeleton, then one PATCH per event,
// normalized.
func seedPatches(t *testing.T, taskID, planName string) []any {
	t.Helper()
	dir := filepath.Join("..", "testdata", "examples", "A")
	data, err := os.ReadFile(filepath.Join(dir, "init_patch.json"))
	require.NoError(t, err)
	init := normalizeBrief(t, data)
	init["meta"].(map[string]any)["taskId"] = taskID
	init["plan"].(map[string]any)["name"] = planName
	out := []any{init}
	for _, p := range readJSONL(t, filepath.Join(dir, "patches.jsonl")) {
		if plan, ok := p["plan"].(map[string]any); ok {
			plan["name"] = planName
		}
		out = append(out, normalize(p))
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
		out[i] = normalize(v)
	}
	return out
}

// waitPatches waits until karvi has accepted at least n brief PATCHes for
// the task and returns how many it has.
func (r *rig) waitPatches(ctx context.Context, taskID string, n int) int {
	r.t.Helper()
	for {
		got := len(r.karviPatches(taskID))
		if got >= n {
			return got
		}
		_, err := r.karvi.WaitWrites(ctx, taskID, len(r.karvi.Writes(taskID))+1)
		require.NoError(r.t, err, "waiting for PATCH %d of %s", n, taskID)
	}
}

// Fault 3: karvi refuses connections for 30 s (its port closed), then
// answers 503, then is healthy. Events the conductor writes meanwhile wait
// in the workflow: no PATCH is lost, none arrives out of order (a repeat is
// only ever an exact retry of the PATCH just before), the brief ends
// complete and the task completed.
func TestKarviOutageThen503(t *testing.T) {
	r := newRig(t, rigOptions{sink: "karvi"})
	const id = "OUTAGE1"
	plan := mapping.PlanName(id, 1)
	r.workspace(id)
	run := r.start(dispatch(t, id, seedMessage(1500, 300, 300, "")))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Down once the skeleton and plan_start are in: the phases' PATCHes
	// and both status changes must then wait out the outage.
	before := r.waitPatches(ctx, id, 2)
	require.NoError(t, r.karvi.SetDown(true))
	down := time.Now()
	// The outage is the fault itself, not a wait for an event: the
	// conductor finishes the whole plan meanwhile and the workflow keeps
	// retrying against a closed port.
	time.Sleep(30 * time.Second)
	require.True(t, hasEvent(r.eventsPath(id, plan), "plan_completed", ""),
		"the conductor finished during the outage, so every later PATCH had to wait")
	require.Len(t, r.karviPatches(id), before, "nothing reached karvi while it was down")

	// Back on the same port, but the first two writes get 503. The
	// conductor has finished, so the rest of its events reach the workflow
	// as one batch of PATCHes; two more 503s land inside that batch, right
	// after its second PATCH: a retry must not send the batch's first
	// PATCHes again after newer ones (karvi's brief would move backwards).
	// The latency is karvi's per-request delay, which it waits before it
	// looks at FailNext; arming FailNext as soon as a write is recorded is
	// therefore in time for the next request.
	r.karvi.SetLatency(50 * time.Millisecond)
	r.karvi.FailNext(2, http.StatusServiceUnavailable)
	require.NoError(t, r.karvi.SetDown(false))
	for {
		ls := logLengths(t, r.karviPatches(id))
		if ls[len(ls)-1] >= 4 { // phase_start test: the backlog batch's second PATCH
			r.karvi.FailNext(2, http.StatusServiceUnavailable)
			break
		}
		_, err := r.karvi.WaitWrites(ctx, id, len(r.karvi.Writes(id))+1)
		require.NoError(t, err)
	}
	t.Logf("karvi down %s, then 2 answers 503, then 2 more inside the backlog", time.Since(down).Round(time.Second))

	res := r.result(run)
	require.Equal(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, "completed", r.karviStatus(id))
	require.Equal(t, seedBriefFor(t, id, plan), r.karviBrief(id), "final brief complete")
	logPerEvent(t, r.karviBrief(id), r.singleRun(id, plan))

	all := r.karviPatches(id)
	t.Logf("accepted PATCHes by log length: %v", logLengths(t, all))
	kept, retries := collapseRetries(all)
	require.Equal(t, seedPatches(t, id, plan), decodeAll(t, kept),
		"PATCHes karvi accepted, exact retries collapsed: none lost, none out of order")
	t.Logf("%d PATCHes accepted, %d of them exact retries", len(kept)+retries, retries)

	var statuses []string
	for _, w := range r.karvi.Writes(id) {
		if strings.HasSuffix(w.Path, "/status") {
			var b struct{ Status string }
			require.NoError(t, json.Unmarshal(w.Body, &b))
			statuses = append(statuses, b.Status)
		}
	}
	require.Equal(t, []string{"in_progress", "completed"}, statuses, "status writes in order, each once")
	r.assertNoOrphans()
}
