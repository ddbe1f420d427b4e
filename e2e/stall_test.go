//go:build realserver

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/runview"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// stallTask runs a task whose implement phase's agent writes nothing for
// 6 s (no transcript line, so no event either), with a stall threshold of
// 2 s and the given action, a webhook that counts notifications, and the
// worker's metrics served at the URL it returns.
func stallTask(t *testing.T, id, action string) (*testrig.Rig, *hookReceiver, taskapi.Result, string) {
	hook := newHookReceiver(t, "hook-secret")
	port, err := devenv.FreePort()
	require.NoError(t, err)
	r := testrig.New(t, testrig.Options{Env: []string{"KARVI_EDDA_NOTIFY_SECRET=hook-secret"},
		WorkerArgs: []string{"-notify-url", hook.srv.URL, "-metrics-addr", fmt.Sprintf("127.0.0.1:%d", port)}})
	r.Workspace(id)
	d := testrig.Dispatch(t, id, "Add user authentication with JWT. [sim phase=implement stall=6s]")
	two, timeout := 2, 120
	d.StallAfterSec, d.OnStall, d.TimeoutSec = &two, action, &timeout
	run := r.StartInput(taskapi.TaskInput{Dispatch: d, Tuning: &taskapi.Tuning{CheckpointEvery: 200 * time.Millisecond}})
	if action == "warn" {
		st := r.WaitFor(id, "the stall", func(s taskapi.Status) bool { return s.Stall != nil })
		require.Equal(t, "implement", st.Stall.Phase)
		require.Equal(t, 2*time.Second, st.Stall.After)
		require.Contains(t, r.CurrentDetails(id), "**stalled**: phase implement shows no event and no agent output since")
	}
	return r, hook, r.Result(run), fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
}

// replayStall replays the task's history on the current code;
// STALL_WRITE_HISTORY=1 keeps it with the recorded histories as
// stall-<name>.json.
func replayStall(t *testing.T, r *testrig.Rig, id, name string) {
	t.Helper()
	keepTaskHistory(t, r, id, "STALL_WRITE_HISTORY", "stall-"+name+".json")
}

func streamOf(t *testing.T, r *testrig.Rig, id string) string {
	data, err := os.ReadFile(filepath.Join(r.WorkRoot, "events", taskapi.StreamRunID(id)+".jsonl"))
	require.NoError(t, err)
	return string(data)
}

// warn: the stall is reported while it goes on (status, details, a brief
// note, an event in the stream, one stalled notification), its end is
// noted once when the agent writes again, and the phase completes.
func TestStallWarnsAndThePhaseCompletes(t *testing.T) {
	r, hook, res, metricsURL := stallTask(t, "T60", "warn")
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, "last error: %s", res.Outcome.LastError)
	require.Equal(t, 1, res.Attempt, "a warning stops nothing")

	st, err := r.Status("T60")
	require.NoError(t, err)
	require.Nil(t, st.Stall, "the stall ended")
	require.Equal(t, 1, st.Stalls)

	notes := map[string][]string{}
	var brief struct {
		Log []mapping.LogEntry `json:"log"`
	}
	require.NoError(t, json.Unmarshal(r.FileBriefRaw("T60"), &brief))
	for _, e := range brief.Log {
		notes[e.Action] = append(notes[e.Action], e.Detail)
	}
	require.Len(t, notes["stalled"], 1, "log: %+v", brief.Log)
	require.Len(t, notes["stall_ended"], 1, "log: %+v", brief.Log)
	require.Contains(t, notes["stalled"][0], "phase implement stalled: no event and no agent output for")
	require.Contains(t, notes["stall_ended"][0], "phase implement shows progress again after")

	stream := streamOf(t, r, "T60")
	require.Contains(t, stream, `"source_type":"stalled"`)
	require.Contains(t, stream, `"source_type":"stall_ended"`)

	m := scrape(t, metricsURL)
	require.Equal(t, 1.0, m.value("karvi_edda_phase_stalls_total", "action", "warn"))

	require.Eventually(t, func() bool { return len(hook.kinds()) >= 1 }, 10*time.Second, 50*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // a second one would have come by now
	require.Equal(t, []string{"stalled"}, hook.kinds())
	ev := hook.events()[0]
	require.Equal(t, "T60", ev["task_id"])
	details, _ := ev["details"].(map[string]any)
	require.Equal(t, "implement", details["phase"])
	require.Equal(t, "warn", details["action"])
	replayStall(t, r, "T60", "warn")
}

// redispatch: the stalled attempt is stopped and attempt 2 (a redispatched
// plan, whose agent does not stall) completes.
func TestStallRedispatchesAndAttemptTwoCompletes(t *testing.T) {
	r, hook, res, _ := stallTask(t, "T61", "redispatch")
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, "last error: %s", res.Outcome.LastError)
	require.Equal(t, 2, res.Attempt)
	require.Len(t, res.Attempts, 2)
	require.Equal(t, taskapi.EndedRedispatched, res.Attempts[0].Ended)
	require.Contains(t, res.Attempts[0].LastError, "phase implement stalled")
	require.Equal(t, "completed", r.FileStatus("T61")["status"])
	require.Empty(t, r.LiveConductors())
	require.Eventually(t, func() bool { return len(hook.kinds()) >= 1 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, []string{"stalled"}, hook.kinds())
	replayStall(t, r, "T61", "redispatch")
}

// abort: the task ends aborted, with a reason that names the stall.
func TestStallAbortsTheTask(t *testing.T) {
	r, _, res, _ := stallTask(t, "T62", "abort")
	require.Equal(t, mapping.PlanAborted, res.Outcome.PlanStatus)
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.True(t, strings.HasPrefix(res.Outcome.LastError, "Plan aborted on a stall: phase implement showed no progress"), res.Outcome.LastError)
	require.Equal(t, taskapi.EndedAborted, res.Attempts[0].Ended)
	fs := r.FileStatus("T62")
	require.Equal(t, "blocked", fs["status"])
	blocker, _ := fs["blocker"].(map[string]any)
	require.Contains(t, blocker["reason"], "Plan aborted on a stall", "status: %v", fs)
	require.Empty(t, r.LiveConductors())
	replayStall(t, r, "T62", "abort")
}

// A task of a run that stalls (the worker's -stall-after, as a run's tasks
// carry no threshold of their own): the run's status marks it stalled and
// `starter run status` warns of it while it lasts; once it writes again
// the mark goes, and the run completes.
func TestRunWarnsOfAStalledTask(t *testing.T) {
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass", WorkerArgs: []string{"-stall-after", "2s"}})
	runFile := `{"slug":"st","title":"Stalls","tasks":[
	 {"id":"st-a","title":"A","description":"[sim phase=implement stall=6s]"},
	 {"id":"st-b","title":"B","depends":["st-a"]}]}`
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile), Tuning: &taskapi.Tuning{CheckpointEvery: 200 * time.Millisecond}})
	v := r.WaitRun("st", "the stall", func(v runapi.View) bool {
		a := v.Status.Tasks["st-a"]
		return a != nil && !a.StalledAt.IsZero()
	})
	require.Equal(t, "implement", v.Status.Tasks["st-a"].StalledPhase)
	out := runview.Render(v, runview.Options{Now: time.Now()})
	require.Contains(t, out, "st-a stalled in phase implement: no event and no agent output since")

	doc := r.RunResult(wr, 2*time.Minute)
	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.True(t, doc.Tasks["st-a"].StalledAt.IsZero(), "the stall ended")
	require.Equal(t, 1, doc.Tasks["st-a"].LoopCount, "a warning is no new attempt")
}
