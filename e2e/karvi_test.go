//go:build realserver

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/karvifake"
	"karvi-edda-temporal/internal/testrig"
	"karvi-edda-temporal/workflows"
)

const karviToken = "e2e-karvi-token-7c1f"

// The karvi sink against a server that enforces karvi's rules: deep merge
// with arrays replaced, legal status transitions only, bearer auth.
func TestKarviSinkHappyPath(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken})
	k := r.Karvi
	require.NoError(t, k.AddTask(karvifake.Task{ID: "T5", Status: "dispatched", BriefPath: true,
		Brief: json.RawMessage(`{"meta":{"boardType":"brief"},"controls":{"owner":"karvi"},"log":[]}`)}))
	r.Workspace("T5")
	res := r.Result(r.Start(testrig.Dispatch(t, "T5", "Add user authentication with JWT. "+testrig.ExampleCosts)))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)

	brief := testrig.Normalize(k.Brief("T5")).(map[string]any)
	controls := brief["controls"]
	require.Equal(t, map[string]any{"owner": "karvi"}, controls, "karvi's own fields survive the deep merge")
	delete(brief, "controls")
	require.Equal(t, testrig.ExampleBriefFor(t, "T5", res.PlanName), brief)

	// Every brief write was a PATCH, in example A's order after the skeleton.
	var patches []map[string]any
	var statuses []string
	for _, w := range k.Writes("T5") {
		switch {
		case strings.HasPrefix(w.Path, "/api/brief/"):
			require.Equal(t, "PATCH", w.Method)
			var body map[string]any
			require.NoError(t, json.Unmarshal(w.Body, &body))
			patches = append(patches, body)
		case strings.HasSuffix(w.Path, "/status"):
			var body struct{ Status string }
			require.NoError(t, json.Unmarshal(w.Body, &body))
			statuses = append(statuses, body.Status)
		}
	}
	golden := testrig.ExamplePatchesFor(t, res.PlanName)
	require.Len(t, patches, len(golden)+1)
	for i := range golden {
		require.Equal(t, testrig.Normalize(golden[i]), testrig.Normalize(patches[i+1]), "patch %d", i+1)
	}
	require.Equal(t, []string{"in_progress", "completed"}, statuses, "only legal transitions, each once")
	task, ok := k.Task("T5")
	require.True(t, ok)
	require.Equal(t, "completed", task.Status)

	// The token reached karvi but nothing the worker wrote down.
	logData, err := os.ReadFile(filepath.Join(r.Dir, "worker-1.log"))
	require.NoError(t, err)
	require.NotContains(t, string(logData), karviToken)
}

// A task without a brief: karvi answers 404, the run goes on, the brief stays
// queryable in the workflow, and the problem is visible in the status query.
func TestKarviSinkWithoutBrief(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken})
	k := r.Karvi
	require.NoError(t, k.AddTask(karvifake.Task{ID: "T6", Status: "dispatched"}))
	r.Workspace("T6")
	run := r.Start(testrig.Dispatch(t, "T6", "No brief here."))
	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 3, res.Brief.CompletedPhases, "the brief is kept in the workflow")

	st, err := r.Status("T6")
	require.NoError(t, err)
	require.Contains(t, st.SinkProblem, "no brief for this task")
	task, ok := k.Task("T6")
	require.True(t, ok)
	require.Equal(t, "completed", task.Status, "the status still reached karvi")
	logData, err := os.ReadFile(filepath.Join(r.Dir, "worker-1.log"))
	require.NoError(t, err)
	require.Contains(t, string(logData), "no brief for this task", "the problem is logged")
}

// A finished task redispatched (a new workflow at the next attempt, as
// `starter redispatch` starts one when the old workflow closed): karvi has
// no way from completed to dispatched but through needs_revision, and the
// second attempt runs to completed with a brief of its own.
func TestKarviRedispatchOfCompletedTask(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken})
	k := r.Karvi
	require.NoError(t, k.AddTask(karvifake.Task{ID: "T6", Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)}))
	r.Workspace("T6")
	d := testrig.Dispatch(t, "T6", "Add user authentication with JWT. "+testrig.ExampleCosts)
	first := r.Result(r.Start(d))
	require.EqualValues(t, "completed", first.Outcome.TaskStatus)
	require.Equal(t, "completed", r.KarviStatus("T6"))

	second := r.Result(r.StartInput(workflows.TaskInput{Dispatch: d, Attempt: 2}))
	require.EqualValues(t, "completed", second.Outcome.TaskStatus)
	require.Equal(t, 2, second.Attempt)
	require.Equal(t, "completed", r.KarviStatus("T6"))

	var statuses []string
	for _, w := range k.Writes("T6") {
		if strings.HasSuffix(w.Path, "/status") {
			var body struct{ Status string }
			require.NoError(t, json.Unmarshal(w.Body, &body))
			statuses = append(statuses, body.Status)
		}
	}
	require.Equal(t, []string{"in_progress", "completed", "needs_revision", "in_progress", "dispatched", "in_progress", "completed"},
		statuses, "the redispatch walks completed -> needs_revision -> in_progress -> dispatched")
	brief := r.KarviBrief("T6")
	plan, _ := brief["plan"].(map[string]any)
	require.Equal(t, second.PlanName, plan["name"], "the brief is the second attempt's")
}
