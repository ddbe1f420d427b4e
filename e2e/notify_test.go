//go:build realserver

package e2e

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/workflows"
)

// A task on its own that ends blocked, and a run that ends: the webhook
// hears "blocked" and "run_ended" once each, signed, with the blocker and
// the run's counts; the run's completed task sends nothing of its own.
func TestWebhookHearsBlockedAndRunEndedOnce(t *testing.T) {
	hook := newHookReceiver(t, "hook-secret")
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=100ms",
		Env:        []string{"KARVI_EDDA_NOTIFY_SECRET=hook-secret"},
		WorkerArgs: []string{"-notify-url", hook.srv.URL}})
	r.Workspace("NB1")
	run := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "NB1", "Fix the flaky test. [sim phase=test fail]")})
	res := r.Result(run)
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)

	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(`{"slug":"nrun","title":"Notified","tasks":[
	 {"id":"nrun-a","title":"A"},{"id":"nrun-b","title":"B","depends":["nrun-a"]}]}`)})
	doc := r.RunResult(wr, 2*time.Minute)
	require.Equal(t, runstatus.RunComplete, doc.Status)

	require.Eventually(t, func() bool { return len(hook.kinds()) >= 2 }, 10*time.Second, 50*time.Millisecond)
	// Anything sent twice would be a second id here: give it a moment.
	time.Sleep(time.Second)
	require.ElementsMatch(t, []string{"blocked", "run_ended"}, hook.kinds())
	// Both histories, their notification included, replay on the current
	// code; NOTIFY_WRITE_HISTORY=1 keeps them with the recorded histories.
	hist := filepath.Join("..", "workflows", "testdata", "histories")
	keepHistory(t, r, taskapi.WorkflowID("NB1"), "NOTIFY_WRITE_HISTORY", filepath.Join(hist, "notify-blocked.json"), workflows.Register)
	keepHistory(t, r, runapi.WorkflowID("nrun"), "NOTIFY_WRITE_HISTORY", filepath.Join(hist, "notify-run-ended.json"), workflows.Register)
	for _, ev := range hook.events() {
		switch ev["kind"] {
		case "blocked":
			require.Equal(t, "NB1", ev["task_id"])
			require.NotEmpty(t, ev["reason"])
		case "run_ended":
			require.Equal(t, "nrun", ev["run_id"])
			details, _ := ev["details"].(map[string]any)
			require.Equal(t, "complete", details["status"])
			require.Equal(t, "2", details["done"])
		}
	}
}
