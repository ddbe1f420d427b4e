//go:build realserver

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/notify"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/testrig"
)

// An agent that hits its usage limit in the implement phase, as Claude
// Code reports one (a success-shaped result the conductor takes for done;
// its checks then fail): the task pauses instead of failing, resumes the
// same plan after the reset, and completes with no attempt counted; the
// phase before the limit is not run again.
func TestUsageLimitPausesAndResumesTheSamePlan(t *testing.T) {
	hook := newHookReceiver(t, "hook-secret")
	r := testrig.New(t, testrig.Options{Env: []string{"KARVI_EDDA_NOTIFY_SECRET=hook-secret"},
		WorkerArgs: []string{"-notify-url", hook.srv.URL}})
	r.Workspace("T40")
	d := testrig.Dispatch(t, "T40", "Add user authentication with JWT. [sim phase=test limit resets=3s]")
	run := r.StartInput(taskapi.TaskInput{Dispatch: d, Tuning: &taskapi.Tuning{
		PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}})

	var paused taskapi.Status
	require.Eventually(t, func() bool {
		st, err := r.Status("T40")
		if err == nil && st.Pause != nil {
			paused = st
			return true
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the task must pause")
	require.Equal(t, taskapi.StagePaused, paused.Stage)
	require.Equal(t, "usage_limit", paused.Pause.Reason)
	require.Equal(t, "test", paused.Pause.Phase)
	require.Equal(t, "sign:rate_limit_event", paused.Pause.Source)
	require.False(t, paused.Pause.ResetAt.IsZero(), "the reset is read from resetsAt")
	require.True(t, paused.Pause.Until.After(paused.Pause.ResetAt))
	require.Empty(t, r.LiveConductors(), "the conductor is stopped while the task is paused")

	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, "last error: %s", res.Outcome.LastError)
	require.Equal(t, 1, res.Attempt, "a pause is not an attempt")
	require.Equal(t, r.PlanName("T40", 1), res.PlanName, "the same plan continued")
	require.Equal(t, "completed", r.FileStatus("T40")["status"])

	st, err := r.Status("T40")
	require.NoError(t, err)
	require.Equal(t, 1, st.Pauses)
	require.Nil(t, st.Pause)

	// The phase before the limit ran once; the limited phase's last run
	// passed.
	starts := map[string]int{}
	for _, ev := range r.Events("T40", res.PlanName) {
		if ev["type"] == "phase_start" {
			id, _ := ev["phase_id"].(string)
			starts[id]++
		}
	}
	require.Equal(t, 1, starts["implement"], "phases: %v", starts)
	require.GreaterOrEqual(t, starts["test"], 2, "phases: %v", starts)

	// A person was told of the pause and of the resume, each once, signed.
	require.Eventually(t, func() bool { return len(hook.kinds()) >= 2 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, []string{"paused", "resumed"}, hook.kinds())
	require.Equal(t, "T40", hook.events()[0]["task_id"])
	require.NotEmpty(t, hook.events()[0]["reset_at"])
}

// hookReceiver is a webhook that checks each delivery's signature and
// keeps each delivery id once.
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	seen   map[string]bool
	evs    []map[string]any
	secret string
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	h := &hookReceiver{seen: map[string]bool{}, secret: secret}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil || notify.VerifyRequest([]byte(h.secret), body, req.Header, time.Now()) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev map[string]any
		if err := json.Unmarshal(body, &ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if id, _ := ev["id"].(string); !h.seen[id] {
			h.seen[id] = true
			h.evs = append(h.evs, ev)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) events() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.evs...)
}

func (h *hookReceiver) kinds() []string {
	var out []string
	for _, ev := range h.events() {
		k, _ := ev["kind"].(string)
		out = append(out, k)
	}
	return out
}

// The worker SIGKILLed while the task is paused, and started again after
// the reset: the durable timer still resumes the task, once, and it
// completes in its first attempt with one resumed conductor.
func TestUsageLimitPauseSurvivesTheWorker(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	r.Workspace("T41")
	d := testrig.Dispatch(t, "T41", "Add user authentication with JWT. [sim phase=docs limit resets=2s]")
	run := r.StartInput(taskapi.TaskInput{Dispatch: d, Tuning: &taskapi.Tuning{
		PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}})
	require.Eventually(t, func() bool {
		st, err := r.Status("T41")
		return err == nil && st.Pause != nil
	}, 30*time.Second, 50*time.Millisecond, "the task must pause")
	require.NoError(t, r.KillWorker())
	time.Sleep(3 * time.Second) // past the reset, with no worker
	r.StartWorker()

	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, "last error: %s", res.Outcome.LastError)
	require.Equal(t, 1, res.Attempt)
	resumed, err := filepath.Glob(filepath.Join(r.WorkRoot, "runs", "T41", res.PlanName+"-resume-*"))
	require.NoError(t, err)
	require.Len(t, resumed, 1, "one resumed conductor")
	starts := map[string]int{}
	for _, ev := range r.Events("T41", res.PlanName) {
		if ev["type"] == "phase_start" {
			id, _ := ev["phase_id"].(string)
			starts[id]++
		}
	}
	require.Equal(t, 1, starts["implement"], "phases: %v", starts)
	require.Equal(t, 1, starts["test"], "phases: %v", starts)
}

// Agents that report a limit otherwise pause the task too: the Codex CLI
// (a turn.failed line in the transcript, then a crash without a result)
// and an agent whose crash message, in phase_failed, is the limit's text.
func TestUsageLimitOtherFormsPause(t *testing.T) {
	for _, tc := range []struct{ form, source string }{
		{"codex", "pattern:hit-your-limit"},
		{"crash", "pattern:hit-your-limit"},
	} {
		t.Run(tc.form, func(t *testing.T) {
			r := testrig.New(t, testrig.Options{})
			r.Workspace("T42")
			d := testrig.Dispatch(t, "T42", "Add user authentication with JWT. [sim phase=implement limit="+tc.form+" resets=2s]")
			run := r.StartInput(taskapi.TaskInput{Dispatch: d, Tuning: &taskapi.Tuning{
				PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}})
			res := r.Result(run)
			require.EqualValues(t, "completed", res.Outcome.TaskStatus, "last error: %s", res.Outcome.LastError)
			st, err := r.Status("T42")
			require.NoError(t, err)
			require.Equal(t, 1, st.Pauses, "one pause")
			// The pause, with what recognised the limit, is in the task's
			// event stream.
			stream, err := os.ReadFile(filepath.Join(r.WorkRoot, "events", "run-T42.jsonl"))
			require.NoError(t, err)
			require.Contains(t, string(stream), "usage limit in phase implement ("+tc.source+")")
			require.Equal(t, 1, res.Attempt)
		})
	}
}

// A failing check whose output merely mentions rate limits (the program
// under test has one) is an ordinary failure: the task ends blocked, with
// no pause.
func TestCheckMentioningRateLimitIsNoPause(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	r.Workspace("T43")
	d := testrig.Dispatch(t, "T43", `Add a rate limiter. [sim phase=implement fail error="exit 1: --- FAIL: TestLimiter: expected 429 Too Many Requests, rate limit exceeded, retry after 5s"]`)
	res := r.Result(r.StartInput(taskapi.TaskInput{Dispatch: d}))
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Contains(t, res.Outcome.LastError, "TestLimiter")
	st, err := r.Status("T43")
	require.NoError(t, err)
	require.Zero(t, st.Pauses)
}

// A run whose task pauses on a usage limit: status.json shows the task
// paused (paused_reason usage_limit, paused_at) while its dependent waits;
// after the reset both complete, with no loop counted.
func TestRunShowsAPausedTask(t *testing.T) {
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass"})
	runFile := `{"slug":"pz","title":"Paused","tasks":[
	 {"id":"pz-a","title":"A","description":"[sim phase=test limit resets=4s]"},
	 {"id":"pz-b","title":"B","depends":["pz-a"]}]}`
	statusPath := runact.RunStatusPath(r.WorkRoot, "pz")
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile), Tuning: &taskapi.Tuning{
		PauseMargin: 200 * time.Millisecond, CheckpointEvery: 200 * time.Millisecond}})
	var seen runstatus.Status
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(statusPath)
		if err != nil {
			return false
		}
		var doc runstatus.Status
		if json.Unmarshal(data, &doc) != nil || doc.Tasks["pz-a"] == nil {
			return false
		}
		seen = doc
		return doc.Tasks["pz-a"].Status == runstatus.TaskPaused
	}, 30*time.Second, 20*time.Millisecond, "status.json must show the task paused")
	a := seen.Tasks["pz-a"]
	require.Equal(t, runstatus.PausedUsageLimit, a.PausedReason)
	require.False(t, a.PausedAt.IsZero())
	require.Equal(t, runstatus.TaskQueued, seen.Tasks["pz-b"].Status, "the dependent waits")

	doc := r.RunResult(wr, 2*time.Minute)
	require.Equal(t, runstatus.RunComplete, doc.Status)
	for _, id := range []string{"pz-a", "pz-b"} {
		require.Equal(t, runstatus.TaskDone, doc.Tasks[id].Status, id)
		require.Equal(t, 1, doc.Tasks[id].LoopCount, id)
		require.Empty(t, doc.Tasks[id].PausedReason, id)
	}
}
