//go:build realserver

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// phaseEnv is the env the simulator gave a phase's agent in one attempt.
func phaseEnv(t *testing.T, r *testrig.Rig, taskID string, attempt int, phase string) map[string]string {
	t.Helper()
	plan := r.PlanName(taskID, attempt)
	data, err := os.ReadFile(filepath.Join(r.TaskDir(taskID), ".edda", "conductor", plan, "phase-env-"+phase+".json"))
	require.NoError(t, err, "task %s attempt %d", taskID, attempt)
	var env map[string]string
	require.NoError(t, json.Unmarshal(data, &env))
	return env
}

// A diamond beside a task that always fails and its dependent: the diamond
// completes in dependency order, the failing task loops three times on
// sonnet and twice on opus and then blocks its dependent, and never more
// conductors run than the run's concurrency, as the process table shows.
func TestRunDiamondAndFailureCascade(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=150ms cost=0.10"})
	runFile := `{"slug":"dc","title":"Diamond and cascade","concurrency":2,"tasks":[
	 {"id":"dc-a","title":"A","complexity":2},
	 {"id":"dc-b","title":"B","depends":["dc-a"],"complexity":2},
	 {"id":"dc-c","title":"C","depends":["dc-a"],"complexity":8},
	 {"id":"dc-d","title":"D","depends":["dc-b","dc-c"]},
	 {"id":"dc-f","title":"F","description":"[sim phase=test fail]","complexity":3},
	 {"id":"dc-g","title":"G","blocked_by":["dc-f"]}]}`

	// A reader hammers status.json while the run writes it: it must never
	// see a partial document.
	statusPath := runact.RunStatusPath(r.WorkRoot, "dc")
	var reads, stopReading atomic.Int64
	var readErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for stopReading.Load() == 0 {
			data, err := os.ReadFile(statusPath)
			if os.IsNotExist(err) {
				continue
			}
			if err == nil {
				var doc runstatus.Status
				err = json.Unmarshal(data, &doc)
			}
			if err != nil {
				readErr = err
				return
			}
			reads.Add(1)
		}
	}()

	live := r.SampleConductors()
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile)})
	doc := r.RunResult(wr, 3*time.Minute)
	live.Stop(t)
	most := live.Most()
	stopReading.Store(1)
	wg.Wait()

	require.NoError(t, readErr, "a reader of status.json saw a partial document")
	require.NotZero(t, reads.Load())
	require.LessOrEqual(t, most, 2, "more conductors at once than the run's concurrency")
	require.NotZero(t, most)

	require.Equal(t, runstatus.RunPartial, doc.Status)
	for _, id := range []string{"dc-a", "dc-b", "dc-c", "dc-d"} {
		require.Equal(t, runstatus.TaskDone, doc.Tasks[id].Status, id)
		require.Equal(t, 1, doc.Tasks[id].LoopCount, id)
	}
	a, b, c, d := doc.Tasks["dc-a"], doc.Tasks["dc-b"], doc.Tasks["dc-c"], doc.Tasks["dc-d"]
	require.False(t, b.StartedAt.Before(a.CompletedAt), "b started before a completed")
	require.False(t, d.StartedAt.Before(b.CompletedAt) || d.StartedAt.Before(c.CompletedAt), "d started before b and c")
	require.Equal(t, "opus", c.Model)

	f := doc.Tasks["dc-f"]
	require.Equal(t, runstatus.TaskFailed, f.Status)
	require.Equal(t, 1, f.ModelUpgrades)
	require.Equal(t, "opus", f.Model)
	require.Contains(t, f.Error, "Phase test failed")
	require.Contains(t, f.Error, "upgraded from sonnet after 3")
	g := doc.Tasks["dc-g"]
	require.Equal(t, runstatus.TaskBlocked, g.Status)
	require.Equal(t, []string{"dc-f"}, g.BlockedBy)
	require.Equal(t, &runstatus.Summary{TotalTasks: 6, Successful: 4, Failed: 1, TotalLoops: 6, ModelUpgrades: 1,
		DurationMinutes: doc.Summary.DurationMinutes}, doc.Summary)

	// The model reached every phase's agent: sonnet for f's first three
	// attempts, opus for the two after the upgrade.
	for n := 1; n <= 5; n++ {
		want := "sonnet"
		if n > 3 {
			want = "opus"
		}
		require.Equal(t, want, phaseEnv(t, r, "dc-f", n, "implement")[mapping.ModelEnv], "attempt %d", n)
	}
	_, err := os.Stat(filepath.Join(r.TaskDir("dc-g"), ".edda"))
	require.True(t, os.IsNotExist(err), "a blocked task must not start")

	// d heard of b and c: the first phase of its plan carries their outcome.
	plan, err := os.ReadFile(filepath.Join(r.WorkRoot, "runs", "dc-d", r.PlanName("dc-d", 1), "plan.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(plan), "## Upstream Context")
	require.Contains(t, string(plan), "dc-b (B)")
	require.Contains(t, string(plan), "3/3 phases completed")

	// status.json on disk is the final document.
	data, err := os.ReadFile(statusPath)
	require.NoError(t, err)
	var disk runstatus.Status
	require.NoError(t, json.Unmarshal(data, &disk))
	require.Equal(t, doc.Summary, disk.Summary)
	require.Equal(t, doc.Status, disk.Status)

	// The run ended partial; a person skips the failed task, which reopens
	// the run where it ended: g runs, and the run completes. A request that
	// does not apply is refused and reopens nothing.
	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	out, err := exec.Command(bin, "-address", r.Server.Addr, "run", "retry", "dc", "dc-a").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "cannot be reopened: task dc-a: cannot retry: it is done")
	out, err = exec.Command(bin, "-address", r.Server.Addr, "run", "skip", "dc", "dc-f").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "reopened")
	doc = r.RunResult(r.Client.GetWorkflow(t.Context(), runapi.WorkflowID("dc"), ""), 2*time.Minute)
	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Equal(t, runstatus.TaskSkipped, doc.Tasks["dc-f"].Status)
	require.Equal(t, runstatus.TaskDone, doc.Tasks["dc-g"].Status)
	require.Equal(t, 1, doc.Tasks["dc-a"].LoopCount, "a done task is not run again")

	// The run's event stream, read through Temporal: the run's states and
	// each task's, the reopened run's after the first's.
	out, err = exec.Command(bin, "-address", r.Server.Addr, "-task-queue", r.Queue, "run", "events", "-json", "dc").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var states []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ev, err := canonical.Parse([]byte(line))
		require.NoError(t, err, line)
		_, _, err = canonical.Validate(ev)
		require.NoError(t, err, line)
		if ev.AgentID == "task-dc-f" || ev.AgentID == canonical.RunAgent {
			if s := ev.AgentID + ":" + string(ev.State); len(states) == 0 || states[len(states)-1] != s {
				states = append(states, s)
			}
		}
	}
	// A loop a status write saw (queued again, then running) is in error
	// between its attempts; how many a write sees depends on timing.
	seq := strings.Join(states, " ")
	for loop := "task-dc-f:running task-dc-f:error task-dc-f:running"; strings.Contains(seq, loop); {
		seq = strings.ReplaceAll(seq, loop, "task-dc-f:running")
	}
	// dc-f fails (error: a retry could still run it), the run ends, is
	// reopened (done, then idle as the table asks, then running) and
	// dc-f is skipped: its failure stands.
	require.Equal(t, strings.Join([]string{"run:running", "task-dc-f:idle", "task-dc-f:running", "task-dc-f:error",
		"run:done", "run:idle", "run:running", "task-dc-f:failed", "run:done"}, " "), seq)
}

// A person at the controls: pause holds back a task whose dependency
// finished, resume lets it go, retry gives a failed task new attempts, skip
// lets its dependent run, refusals come back with the reason, and abort
// stops a task that would otherwise run for half an hour.
func TestRunPauseResumeRetrySkipAbort(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=100ms"})
	runFile := `{"slug":"ctl","title":"Controls","concurrency":4,"tasks":[
	 {"id":"ctl-p1","title":"P1","description":"[sim delay=1500ms]"},
	 {"id":"ctl-p2","title":"P2","depends":["ctl-p1"]},
	 {"id":"ctl-x","title":"X","description":"[sim phase=test fail]"},
	 {"id":"ctl-y","title":"Y","depends":["ctl-x"]},
	 {"id":"ctl-s","title":"S","description":"[sim phase=implement hang]"}]}`
	_, _ = r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile)})
	starter := func(args ...string) (string, error) {
		bin, err := devenv.Binary("starter")
		require.NoError(t, err)
		out, err := exec.Command(bin, append([]string{"-address", r.Server.Addr}, args...)...).CombinedOutput()
		return string(out), err
	}
	task := func(v runapi.View, id string) *runstatus.Task { return v.Status.Tasks[id] }

	r.WaitRun("ctl", "p1 running", func(v runapi.View) bool { return task(v, "ctl-p1").Status == runstatus.TaskRunning })
	out, err := starter("run", "pause", "ctl")
	require.NoError(t, err, out)
	out, err = starter("run", "pause", "ctl")
	require.Error(t, err)
	require.Contains(t, out, "cannot pause: it is paused")
	v := r.WaitRun("ctl", "p1 done", func(v runapi.View) bool { return task(v, "ctl-p1").Status == runstatus.TaskDone })
	require.Equal(t, runstatus.RunPaused, v.Status.Status)
	require.Equal(t, runstatus.TaskQueued, task(v, "ctl-p2").Status, "a paused run starts no task")
	require.Zero(t, v.Tasks[1].Attempt)

	out, err = starter("run", "resume", "ctl")
	require.NoError(t, err, out)
	r.WaitRun("ctl", "p2 done", func(v runapi.View) bool { return task(v, "ctl-p2").Status == runstatus.TaskDone })

	// x fails for good after five loops; y waits on it.
	v = r.WaitRun("ctl", "x failed", func(v runapi.View) bool { return task(v, "ctl-x").Status == runstatus.TaskFailed })
	require.Equal(t, []string{"ctl-x"}, task(v, "ctl-y").BlockedBy)
	require.Equal(t, 5, v.Tasks[2].Attempt)
	out, err = starter("run", "skip", "ctl", "ctl-s")
	require.Error(t, err, "skipping a running task must be refused")
	require.Contains(t, out, "task ctl-s: cannot skip: it is running")
	out, err = starter("run", "retry", "ctl", "nope")
	require.Error(t, err)
	require.Contains(t, out, "task nope: unknown task")

	// A retry gives x new attempts on opus (its upgrade stays): two loops.
	out, err = starter("run", "retry", "ctl", "ctl-x")
	require.NoError(t, err, out)
	v = r.WaitRun("ctl", "x failed again", func(v runapi.View) bool {
		return task(v, "ctl-x").Status == runstatus.TaskFailed && v.Tasks[2].Attempt == 7
	})
	require.Equal(t, 2, task(v, "ctl-x").LoopCount)

	out, err = starter("run", "skip", "ctl", "ctl-x")
	require.NoError(t, err, out)
	r.WaitRun("ctl", "y done", func(v runapi.View) bool { return task(v, "ctl-y").Status == runstatus.TaskDone })

	// s hangs; abort ends the run and stops its conductor.
	out, err = starter("run", "abort", "-reason", "enough", "ctl")
	require.NoError(t, err, out)
	var doc runstatus.Status
	require.Eventually(t, func() bool {
		v := r.RunView("ctl")
		doc = v.Status
		return doc.Status == runstatus.RunPartial
	}, time.Minute, 100*time.Millisecond)
	require.Equal(t, runstatus.TaskFailed, doc.Tasks["ctl-s"].Status)
	require.Equal(t, "run aborted", doc.Tasks["ctl-s"].Error)
	require.Equal(t, runstatus.TaskSkipped, doc.Tasks["ctl-x"].Status)
	res := r.Result(r.Client.GetWorkflow(t.Context(), runapi.TaskWorkflowID("ctl-s"), ""))
	require.Equal(t, mapping.MsgUserAbort, res.Outcome.LastError, "the task was aborted, not left running")
	require.Empty(t, r.LiveConductors())
	out, err = starter("run", "resume", "ctl")
	require.Error(t, err)
	require.Contains(t, out, "run ctl")
}

// 200 tasks through a run that continues-as-new after every 40 task starts,
// with up to 20 tasks running each time: no child is lost or started twice, and every
// task completes.
func TestRunContinueAsNewWithChildrenRunning(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=20ms cost=0.01"})
	var tasks []string
	for i := range 200 {
		dep := ""
		if i >= 20 {
			dep = fmt.Sprintf(`,"depends":["can-%03d"]`, i-20)
		}
		tasks = append(tasks, fmt.Sprintf(`{"id":"can-%03d","title":"T%d"%s}`, i, i, dep))
	}
	runFile := `{"slug":"can","title":"Many","concurrency":20,"tasks":[` + strings.Join(tasks, ",") + `]}`
	live := r.SampleConductors()
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile), ContinueAsNewAfter: 40})
	firstRun := wr.GetRunID() // Get follows the chain and moves the handle on
	doc := r.RunResult(wr, 8*time.Minute)
	live.Stop(t)
	require.LessOrEqual(t, live.Most(), 20)

	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Equal(t, 200, doc.Summary.Successful)
	require.Equal(t, 200, doc.Summary.TotalLoops, "one attempt per task: none started twice")
	v := r.RunView("can")
	// How many hand-overs happen depends on when a quiet moment comes (no
	// child between start and started); at least one must.
	require.GreaterOrEqual(t, v.ContinuedAsNew, 1)
	// The first run handed over with children still running: more of them
	// started than ended in its history.
	started, ended := 0, 0
	it := r.Client.GetWorkflowHistory(t.Context(), wr.GetID(), firstRun, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
			started++
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
			ended++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			require.Greater(t, started-ended, 0, "no child was running at the hand-over")
		}
	}
	require.NotZero(t, started)
	for _, tv := range v.Tasks {
		require.Equal(t, 1, tv.Attempt, tv.ID)
	}
	// Each task workflow ran once: one run per id, completed.
	runs, err := devenv.Runs(r.WorkRoot)
	require.NoError(t, err)
	require.Len(t, runs, 200, "one conductor run per task")
}
