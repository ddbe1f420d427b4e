//go:build realserver

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/karvifake"
	"karvi-edda-temporal/testkit/testrig"
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
		case statusWrite(w.Path):
			var body struct{ Status string }
			require.NoError(t, json.Unmarshal(w.Body, &body))
			if body.Status != "" {
				statuses = append(statuses, body.Status)
			}
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

	second := r.Result(r.StartInput(taskapi.TaskInput{Dispatch: d, Attempt: 2}))
	require.EqualValues(t, "completed", second.Outcome.TaskStatus)
	require.Equal(t, 2, second.Attempt)
	require.Equal(t, "completed", r.KarviStatus("T6"))

	var statuses []string
	for _, w := range k.Writes("T6") {
		if statusWrite(w.Path) {
			var body struct{ Status string }
			require.NoError(t, json.Unmarshal(w.Body, &body))
			if body.Status != "" {
				statuses = append(statuses, body.Status)
			}
		}
	}
	require.Equal(t, []string{"in_progress", "completed", "needs_revision", "in_progress", "dispatched", "in_progress", "completed"},
		statuses, "the redispatch walks completed -> needs_revision -> in_progress -> dispatched")
	brief := r.KarviBrief("T6")
	plan, _ := brief["plan"].(map[string]any)
	require.Equal(t, second.PlanName, plan["name"], "the brief is the second attempt's")
}

// statusWrite reports whether a write's path can carry a status: /status,
// or /update (the last step with the dispatch result).
func statusWrite(path string) bool {
	return strings.HasSuffix(path, "/status") || strings.HasSuffix(path, "/update")
}

// karviStatuses are the statuses the worker POSTed for a task, in order,
// through /status or /update.
func karviStatuses(t *testing.T, k *karvifake.Server, id string) []string {
	t.Helper()
	var out []string
	for _, w := range k.Writes(id) {
		if statusWrite(w.Path) {
			var body struct{ Status string }
			require.NoError(t, json.Unmarshal(w.Body, &body))
			if body.Status == "" {
				continue
			}
			out = append(out, body.Status)
		}
	}
	return out
}

// 30 short tasks at once against karvi at its default rate limit (120
// requests a minute per client address): the worker keeps under it, so
// karvi refuses none of its requests, and every task's final status and
// brief land.
func TestKarviThirtyTasksAtDefaultRateLimit(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken})
	k := r.Karvi
	const n = 30
	var runs []client.WorkflowRun
	var ids []string
	for i := range n {
		id := fmt.Sprintf("RL%02d", i)
		r.AddKarviTask(id)
		r.Workspace(id)
		ids = append(ids, id)
	}
	for _, id := range ids {
		runs = append(runs, r.Start(testrig.Dispatch(t, id, "Short task. [sim phase=implement delay=200ms] "+
			"[sim phase=test delay=200ms] [sim phase=docs delay=200ms]")))
	}
	for i, run := range runs {
		res := r.Result(run)
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, ids[i])
	}
	for _, id := range ids {
		require.Equal(t, "completed", r.KarviStatus(id), "%s: final status written", id)
		require.EqualValues(t, 3, r.KarviBrief(id)["completedPhases"], "%s: final brief written", id)
	}
	st := k.Stats()
	kinds := map[string]int{}
	for _, w := range k.Writes("") {
		kinds[w.Method+" "+w.Path[strings.LastIndex(w.Path, "/"):]]++
	}
	t.Logf("karvi saw %d requests for %d tasks (%.1f a task), refused %d; writes %v", st.Requests, n, float64(st.Requests)/n, st.Refused, kinds)
	require.Zero(t, st.Refused, "karvi refused requests: the worker went over its rate limit")
}

// Version conflicts (karvi's review process wrote the board between karvi's
// read and its write) on a status write and on a brief PATCH are retried:
// the task ends completed, its brief whole.
func TestKarviVersionConflictsAreRetried(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken})
	k := r.Karvi
	const id = "VC1"
	r.AddKarviTask(id)
	r.Workspace(id)
	// The second status write is the final one (in_progress, completed);
	// the third PATCH is a phase's.
	require.NoError(t, k.InjectConflict(karvifake.Conflict{Route: "status", TaskID: id, Nth: 2}))
	require.NoError(t, k.InjectConflict(karvifake.Conflict{Route: "brief", TaskID: id, Nth: 3}))
	res := r.Result(r.Start(testrig.Dispatch(t, id, "Add user authentication with JWT. "+testrig.ExampleCosts)))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, "completed", r.KarviStatus(id), "the final status survived the conflict")
	require.Equal(t, []string{"in_progress", "completed"}, karviStatuses(t, k, id))
	require.Equal(t, testrig.ExampleBriefFor(t, id, res.PlanName), r.KarviBrief(id), "the brief survived the conflict")
}

// A task cancelled on the board while its attempt runs stays cancelled
// when the attempt is aborted: karvi allows nothing after cancelled, and
// the workflow ends without an error.
func TestKarviCancelledOnBoardStaysCancelled(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken})
	k := r.Karvi
	const id = "CX1"
	r.AddKarviTask(id)
	r.Workspace(id)
	run := r.Start(testrig.Dispatch(t, id, "Long task. [sim phase=implement delay=60s]"))
	r.WaitPhase(id, "implement")
	require.NoError(t, k.SetStatus(id, "cancelled", "not wanted any more"))
	require.NoError(t, r.Signal(id, taskapi.SignalAbort, taskapi.AbortSignal{Reason: "cancelled on the board"}))
	res, err := r.ResultErr(run)
	require.NoError(t, err, "the workflow ends cleanly")
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Equal(t, "cancelled", r.KarviStatus(id), "the board's cancel stands")
	require.NotContains(t, karviStatuses(t, k, id), "blocked")
}

// A task cancelled on the board after it was handed to the worker but
// before the attempt's first status write (the intake started its
// workflow a moment before the cancel): no conductor starts, karvi's
// cancel stands, and the workflow ends cleanly with an outcome that says
// the task was not run.
func TestKarviCancelledBeforeTheAttemptStarted(t *testing.T) {
	// No worker yet: the workflow is started, then the task cancelled, and
	// only then can the attempt begin.
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken, NoWorker: true})
	k := r.Karvi
	const id = "CX2"
	r.AddKarviTask(id)
	r.Workspace(id)
	run := r.Start(testrig.Dispatch(t, id, "Never runs. [sim phase=implement delay=60s]"))
	require.NoError(t, k.SetStatus(id, "cancelled", "not wanted any more"))
	r.StartWorker()
	res, err := r.ResultErr(run)
	require.NoError(t, err, "the workflow ends cleanly")
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Contains(t, res.Outcome.LastError, "cancelled on the board before it started")
	require.Len(t, res.Attempts, 1)
	require.Equal(t, "aborted", res.Attempts[0].Ended)
	require.Equal(t, "cancelled", r.KarviStatus(id), "the board's cancel stands")
	require.Empty(t, karviStatuses(t, k, id), "no status written over the cancel")
	runs, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.Empty(t, runs, "no conductor was started")
	// The history replays on this code; NOTRUN_WRITE_HISTORY=1 keeps it
	// with the recorded histories.
	keepTaskHistory(t, r, id, "NOTRUN_WRITE_HISTORY", "notrun-board-cancel.json")
}

// A task deleted from the board before the attempt's first status write
// ends the same way: nothing is started, and the workflow ends cleanly.
func TestKarviDeletedBeforeTheAttemptStarted(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken, NoWorker: true})
	k := r.Karvi
	const id = "DEL2"
	r.AddKarviTask(id)
	r.Workspace(id)
	run := r.Start(testrig.Dispatch(t, id, "Never runs. [sim phase=implement delay=60s]"))
	require.True(t, k.DeleteTask(id))
	r.StartWorker()
	res, err := r.ResultErr(run)
	require.NoError(t, err, "the workflow ends cleanly")
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Contains(t, res.Outcome.LastError, "no longer exists")
	_, ok := k.Task(id)
	require.False(t, ok)
	runs, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.Empty(t, runs, "no conductor was started")
}

// A task karvi made through its API has no brief (404 on the brief routes):
// it still runs and gets its status; the problem is said once in the log.
func TestKarviTaskWithoutBriefSaidOnce(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken})
	k := r.Karvi
	const id = "NB1"
	require.NoError(t, k.AddTask(karvifake.Task{ID: id, Title: "made through the API", Status: "dispatched"}))
	r.Workspace(id)
	res := r.Result(r.Start(testrig.Dispatch(t, id, "No brief. [sim phase=implement delay=2s events=6] "+
		"[sim phase=test delay=2s events=6] [sim phase=docs delay=2s]")))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, "completed", r.KarviStatus(id))
	st, err := r.Status(id)
	require.NoError(t, err)
	require.Contains(t, st.SinkProblem, "no brief for this task")
	logData, err := os.ReadFile(filepath.Join(r.Dir, "worker-1.log"))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(logData), "brief patch not delivered"),
		"said once in the log, not once per checkpoint")
}

// A task karvi deletes while it runs ends the attempt cleanly: the
// workflow completes, nothing is left running.
func TestKarviTaskDeletedWhileRunning(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken})
	k := r.Karvi
	const id = "DEL1"
	r.AddKarviTask(id)
	r.Workspace(id)
	run := r.Start(testrig.Dispatch(t, id, "Short. [sim phase=implement delay=3s] [sim phase=test delay=1s]"))
	r.WaitPhase(id, "implement")
	require.True(t, k.DeleteTask(id))
	res, err := r.ResultErr(run)
	require.NoError(t, err, "the workflow ends cleanly")
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	_, ok := k.Task(id)
	require.False(t, ok)
}

// A task stopped before its conductor started (karvi: dispatched; here the
// conductor cannot run at all) reaches blocked through in_progress: karvi
// refuses dispatched -> blocked.
func TestKarviStoppedBeforeStartWalksALegalPath(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken,
		WorkerArgs: []string{"-conductor", "/bin/false"}})
	k := r.Karvi
	const id = "AB1"
	r.AddKarviTask(id)
	r.Workspace(id)
	res, err := r.ResultErr(r.Start(testrig.Dispatch(t, id, "Never starts.")))
	require.NoError(t, err)
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Equal(t, "blocked", r.KarviStatus(id))
	require.Equal(t, []string{"in_progress", "blocked"}, karviStatuses(t, k, id))
}

// shortTaskRequestsWhenCongested bounds what one short task costs in
// requests naming it while karvi's bucket is low (congested: the worker
// holds brief updates until karvi can take them, and sends them with the
// checkpoint at the latest): the skeleton with every brief update merged
// into it (one PUT), in_progress, and the final status with the dispatch
// result (one /update).
const shortTaskRequestsWhenCongested = 3

// A short task started while karvi's rate limit bucket is spent (another
// client of the same address spent it just before the worker's first
// request, for a first task): the worker waits out the 429 and then, with
// its own bucket low, sends as few requests as the guarantees allow for
// the second task. Counts, not time: what karvi accepted naming the task
// (board reads name none and are shared by every task).
func TestKarviShortTaskRequestsWhenCongested(t *testing.T) {
	var spend sync.Once
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken,
		KarviWrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				spend.Do(func() { spendKarviBucket(h) })
				h.ServeHTTP(w, req)
			})
		}})
	k := r.Karvi
	prompt := "Short task. [sim phase=implement delay=200ms] [sim phase=test delay=200ms] [sim phase=docs delay=200ms]"
	for _, id := range []string{"CG00", "CG01"} {
		r.AddKarviTask(id)
		r.Workspace(id)
		res := r.Result(r.Start(testrig.Dispatch(t, id, prompt)))
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, id)
		require.Equal(t, "completed", r.KarviStatus(id), "%s: final status written", id)
		require.EqualValues(t, 3, r.KarviBrief(id)["completedPhases"], "%s: final brief written", id)
	}
	st := k.TaskStats("CG01")
	t.Logf("a short task under congestion: %d requests naming it, %d refused, by route %v", st.Requests, st.Refused, st.Routes)
	require.LessOrEqual(t, st.Requests-st.Refused, shortTaskRequestsWhenCongested,
		"requests for one short task: %v", st.Routes)
}

// spendKarviBucket sends board reads from 127.0.0.1 through h until karvi
// refuses one: its bucket for that address is empty.
func spendKarviBucket(h http.Handler) {
	for {
		req := httptest.NewRequest(http.MethodGet, "/api/tasks", nil)
		req.RemoteAddr = "127.0.0.1:1"
		req.Header.Set("Authorization", "Bearer "+karviToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusTooManyRequests {
			return
		}
	}
}
