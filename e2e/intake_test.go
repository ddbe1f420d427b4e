//go:build realserver

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/karvifake"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
	"karvi-edda-temporal/workflows/intakeflow"
)

// intakeRig is a rig whose worker follows its karvi fake's board.
func intakeRig(t *testing.T) *testrig.Rig { return intakeRigWith(t, "") }

func intakeRigWith(t *testing.T, scenario string, args ...string) *testrig.Rig {
	o := testrig.Options{Sink: "karvi", KarviToken: karviToken, Scenario: scenario,
		WorkerArgs: append([]string{"-intake-karvi", "-intake-poll", "2s"}, args...)}
	for _, a := range args {
		if a == "-karvi-rate-limit=off" {
			o.KarviRateLimit = karvifake.RateLimitOff
		}
	}
	r := testrig.New(t, o)
	r.Karvi.SetFeedHeartbeat(time.Second)
	r.Track(intakeapi.WorkflowID(r.Karvi.URL()))
	require.Eventually(t, func() bool {
		_, err := r.Client.DescribeWorkflowExecution(context.Background(), intakeapi.WorkflowID(r.Karvi.URL()), "")
		return err == nil
	}, time.Minute, 100*time.Millisecond, "the worker starts the intake")
	return r
}

// taskIDs are unique on the shared dev server: a task workflow id once
// used is never started again by the intake.
func taskIDs(prefix string, n int) []string {
	stamp := time.Now().UnixNano() % 1_000_000_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%d-%d", prefix, stamp, i+1)
	}
	return ids
}

// postProject creates tasks on the board as a karvi user does: through
// POST /api/projects, the one route that keeps runtimeHint.
func postProject(t *testing.T, r *testrig.Rig, title string, tasks ...map[string]any) {
	t.Helper()
	postProjectRepo(t, r, title, "", tasks...)
}

// postProjectRepo posts a project with a repo: only then does karvi make
// a project entity, which the intake turns into a run.
func postProjectRepo(t *testing.T, r *testrig.Rig, title, repo string, tasks ...map[string]any) {
	t.Helper()
	post := map[string]any{"title": title, "tasks": tasks}
	if repo != "" {
		post["repo"] = repo
	}
	body, err := json.Marshal(post)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, r.Karvi.URL()+"/api/projects", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+karviToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
}

// boardPost posts body to a karvi route as a board user (operator) does.
func boardPost(t *testing.T, r *testrig.Rig, path string, body any) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, r.Karvi.URL()+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+karviToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "POST %s", path)
}

func eddaTask(id string) map[string]any {
	return map[string]any{"id": id, "title": "Task " + id, "description": "Add user authentication with JWT. " + testrig.ExampleCosts,
		"runtimeHint": "edda", "skill": "sequential"}
}

// waitKarvi waits until every task has the status on the fake board.
func waitKarvi(t *testing.T, r *testrig.Rig, status string, ids ...string) {
	t.Helper()
	wait.EventuallyEvery(t, 3*time.Minute, 200*time.Millisecond, fmt.Sprintf("tasks %v %s on karvi", ids, status), func() (any, bool) {
		var behind []string
		for _, id := range ids {
			if tk, ok := r.Karvi.Task(id); !ok || tk.Status != status {
				behind = append(behind, fmt.Sprintf("%s=%s", id, tk.Status))
			}
		}
		return fmt.Sprintf("not %s: %v", status, behind), len(behind) == 0
	})
}

// runsOf counts the workflow runs of a task id, closed ones included.
func runsOf(t *testing.T, r *testrig.Rig, taskID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: r.Server.Namespace, Query: fmt.Sprintf("WorkflowId = '%s'", taskapi.WorkflowID(taskID))})
	require.NoError(t, err)
	return len(resp.GetExecutions())
}

// workflowExists says whether a workflow of that id was started: the
// intake names a run when it claims the project, before the activity that
// starts it has run.
func workflowExists(t *testing.T, r *testrig.Rig, workflowID string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.Client.DescribeWorkflowExecution(ctx, workflowID, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return false
	}
	require.NoError(t, err, "describe %s", workflowID)
	return true
}

func intakeStatus(t *testing.T, r *testrig.Rig) intakeapi.Status {
	t.Helper()
	return testrig.Query[intakeapi.Status](r, intakeapi.WorkflowID(r.Karvi.URL()), intakeapi.QueryStatus)
}

// A task created on the board runs to its end by itself, with no starter
// call; seen again on later reads, it is not started again.
func TestIntakeRunsBoardTaskByItself(t *testing.T) {
	r := intakeRig(t)
	ids := taskIDs("hp", 1)
	id := ids[0]
	r.Track(taskapi.WorkflowID(id))
	r.Workspace(id)
	postProject(t, r, "intake happy path", eddaTask(id))
	waitKarvi(t, r, "completed", id)

	var res taskapi.Result
	require.NoError(t, r.Client.GetWorkflow(context.Background(), taskapi.WorkflowID(id), "").Get(context.Background(), &res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, "sequential", res.Dispatch.Skill)
	require.Contains(t, res.Dispatch.Message, "Task "+id+"\n\nAdd user authentication")

	// More board writes: the task is seen again, and not started again.
	require.NoError(t, r.Karvi.AddTask(karvifake.Task{ID: "other-" + id, Title: "not ours", Status: "cancelled",
		Fields: map[string]any{"runtimeHint": "openclaw"}}))
	require.Eventually(t, func() bool {
		st := intakeStatus(t, r)
		for _, c := range st.Claims {
			if c.TaskID == id && c.Phase == "ended" && c.Final == "completed" {
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, "the intake sees the workflow end")
	require.Equal(t, 1, runsOf(t, r, id), "started once")
	st := intakeStatus(t, r)
	require.Equal(t, 1, st.Counts.Started)
	require.Empty(t, st.Problem)

	// The operator's view: what it follows, claimed, skipped and why.
	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	out, err := exec.Command(bin, "intake", "status", "-address", r.Server.Addr, "-namespace", r.Server.Namespace,
		"-board", r.Karvi.URL()).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, want := range []string{"follows  " + r.Karvi.URL(), `runtimeHint "edda"`, id, "ended", "completed",
		"skipped:", "task other-" + id + `: cancelled on a task routed to "openclaw", not "edda"`, "started karvi-task-" + id} {
		require.Contains(t, string(out), want)
	}
}

// The worker SIGKILLed five times while 30 tasks arrive on the board:
// every task is started exactly once (one workflow run for its id) and
// runs to its end; none is missed. karvi's rate limit is off on both
// sides, so the test measures the intake, not the limiter.
func TestIntakeWorkerKilledWhileTasksArrive(t *testing.T) {
	r := intakeRigWith(t, "", "-karvi-rate-limit=off")
	ids := taskIDs("kill", 30)
	for _, id := range ids {
		r.Track(taskapi.WorkflowID(id))
		r.Workspace(id)
	}
	for batch := 0; batch < 5; batch++ {
		var tasks []map[string]any
		for _, id := range ids[batch*6 : batch*6+6] {
			tasks = append(tasks, eddaTask(id))
		}
		postProject(t, r, fmt.Sprintf("batch %d", batch), tasks...)
		// Kill at varying moments after the arrival: in the follow, in
		// the starts, between a start and the workflow's next task.
		time.Sleep(time.Duration(200+batch*500) * time.Millisecond)
		require.NoError(t, r.KillWorker())
		r.StartWorker()
	}
	waitKarvi(t, r, "completed", ids...)
	for _, id := range ids {
		require.Equal(t, 1, runsOf(t, r, id), "task %s started once", id)
	}
	require.Eventually(t, func() bool {
		st := intakeStatus(t, r)
		ended := 0
		for _, c := range st.Claims {
			if c.Phase == "ended" {
				ended++
			}
		}
		return ended == len(ids)
	}, time.Minute, 500*time.Millisecond, "the intake sees every workflow end")
}

// karvi down for 20 s while tasks are dispatched: the intake says so,
// and claims every task once karvi is back.
func TestIntakeKarviDownWhileTasksArrive(t *testing.T) {
	port, err := devenv.FreePort()
	require.NoError(t, err)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	r := intakeRigWith(t, "", "-metrics-addr", fmt.Sprintf("127.0.0.1:%d", port))
	unreachable := func() float64 {
		return scrape(t, metricsURL).value("karvi_edda_intake_karvi_unreachable", "board", r.Karvi.URL())
	}
	ids := taskIDs("down", 4)
	for _, id := range ids {
		r.Track(taskapi.WorkflowID(id))
		r.Workspace(id)
	}
	postProject(t, r, "before", eddaTask(ids[0]))
	waitKarvi(t, r, "completed", ids[0])
	require.NoError(t, r.Karvi.SetDown(true))
	require.Eventually(t, func() bool { return intakeStatus(t, r).Problem != "" }, time.Minute, 200*time.Millisecond,
		"the intake says karvi cannot be read")
	require.Eventually(t, func() bool { return unreachable() == 1 }, 30*time.Second, 200*time.Millisecond,
		"the gauge says karvi cannot be read")
	for _, id := range ids[1:] {
		require.NoError(t, r.Karvi.AddTask(karvifake.Task{ID: id, Title: "Task " + id, Status: "dispatched",
			Fields: map[string]any{"runtimeHint": "edda", "skill": "sequential", "description": "Add user authentication with JWT. " + testrig.ExampleCosts}}))
	}
	time.Sleep(20 * time.Second) // karvi down for 20 s in all, arrivals included
	require.NoError(t, r.Karvi.SetDown(false))
	waitKarvi(t, r, "completed", ids...)
	for _, id := range ids {
		require.Equal(t, 1, runsOf(t, r, id), "task %s started once", id)
	}
	require.Eventually(t, func() bool { return intakeStatus(t, r).Problem == "" }, time.Minute, 200*time.Millisecond)
	require.Zero(t, unreachable(), "the gauge clears once karvi answers")
	require.Equal(t, 1.0, scrape(t, metricsURL).value("karvi_edda_intake_karvi_problems_total", "board", r.Karvi.URL(), "kind", "unreachable"))
}

// Cancel on the board aborts the running task workflow.
func TestIntakeBoardCancelAborts(t *testing.T) {
	r := intakeRigWith(t, "checks=pass delay=60s")
	id := taskIDs("cancel", 1)[0]
	r.Track(taskapi.WorkflowID(id))
	r.Workspace(id)
	postProject(t, r, "to cancel", eddaTask(id))
	waitKarvi(t, r, "in_progress", id)
	boardPost(t, r, "/api/tasks/"+id+"/cancel", map[string]any{"reason": "not needed any more"})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res taskapi.Result
	require.NoError(t, r.Client.GetWorkflow(ctx, taskapi.WorkflowID(id), "").Get(ctx, &res))
	require.Equal(t, mapping.PlanAborted, res.Outcome.PlanStatus, "aborted")
	tk, _ := r.Karvi.Task(id)
	require.Equal(t, "cancelled", tk.Status)
	st := intakeStatus(t, r)
	require.Equal(t, 1, st.Counts.Aborted)
	require.Equal(t, 1, runsOf(t, r, id))
}

// waitClaimEnded waits until the intake has recorded the end of task id's
// workflow.
func waitClaimEnded(t *testing.T, r *testrig.Rig, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range intakeStatus(t, r).Claims {
			if c.TaskID == id && c.Phase == "ended" {
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, "the intake saw %s's workflow end", id)
}

// sendBack sends task id back for another try as a reviewer does:
// needs_revision, then in_progress.
func sendBack(t *testing.T, r *testrig.Rig, id string) {
	t.Helper()
	boardPost(t, r, "/api/tasks/"+id+"/status", map[string]any{"status": "needs_revision"})
	boardPost(t, r, "/api/tasks/"+id+"/status", map[string]any{"status": "in_progress"})
}

// A finished task sent back on the board (completed -> needs_revision ->
// in_progress, as a reviewer does) runs a second attempt, once.
func TestIntakeBoardSendBackRedispatches(t *testing.T) {
	r := intakeRig(t)
	id := taskIDs("again", 1)[0]
	r.Track(taskapi.WorkflowID(id))
	r.Workspace(id)
	postProject(t, r, "to send back", eddaTask(id))
	waitKarvi(t, r, "completed", id)
	waitClaimEnded(t, r, id)
	sendBack(t, r, id)

	require.Eventually(t, func() bool { return runsOf(t, r, id) == 2 }, time.Minute, 300*time.Millisecond, "a second run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res taskapi.Result
	require.NoError(t, r.Client.GetWorkflow(ctx, taskapi.WorkflowID(id), "").Get(ctx, &res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 2, res.Attempt)
	require.Equal(t, "redispatch", string(res.Dispatch.Mode))
	waitKarvi(t, r, "completed", id)
	time.Sleep(3 * time.Second) // more reads of the board
	require.Equal(t, 2, runsOf(t, r, id), "sent back once, run again once")
	require.Equal(t, 1, intakeStatus(t, r).Counts.Redispatch)

	// The intake's history (claim, end, send-back, redispatch, second end)
	// replays on the current code.
	keepIntakeHistory(t, r, "intake-sendback.json")
}

// keepIntakeHistory replays the intake's history so far on the current
// code; INTAKE_WRITE_HISTORY=1 keeps it as name with the intake's
// recorded histories (workflows/intakeflow/testdata/histories).
func keepIntakeHistory(t *testing.T, r *testrig.Rig, name string) {
	t.Helper()
	keepHistory(t, r, intakeapi.WorkflowID(r.Karvi.URL()), "INTAKE_WRITE_HISTORY",
		filepath.Join("..", "workflows", "intakeflow", "testdata", "histories", name), intakeflow.Register)
}

// keepHistory replays the history of workflow id so far on the current
// code (the workflows register adds); with the environment variable env
// set to 1 it keeps it at path, with the recorded histories.
func keepHistory(t *testing.T, r *testrig.Rig, id, env, path string, register func(worker.WorkflowRegistry)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := &historypb.History{}
	it := r.Client.GetWorkflowHistory(ctx, id, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	if os.Getenv(env) != "1" {
		path = filepath.Join(t.TempDir(), filepath.Base(path))
	}
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
	rep := worker.NewWorkflowReplayer()
	register(rep)
	require.NoError(t, rep.ReplayWorkflowHistoryFromJSONFile(nil, path), "replay from %s", path)
}

// A project posted with a repo, all its tasks routed here, becomes one
// run: its tasks run in dependency order under the run, status.json says
// so, and karvi shows them completed.
func TestIntakeProjectBecomesRun(t *testing.T) {
	r := intakeRigWith(t, "checks=pass delay=100ms")
	ids := taskIDs("proj", 2)
	for _, id := range ids {
		r.Track(taskapi.WorkflowID(id))
	}
	postProjectRepo(t, r, "Two step project", "example/demo",
		map[string]any{"id": ids[0], "title": "First", "runtimeHint": "edda"},
		map[string]any{"id": ids[1], "title": "Second", "runtimeHint": "edda", "depends": []string{ids[0]}})
	var run intakeapi.Status
	require.Eventually(t, func() bool {
		run = intakeStatus(t, r)
		return len(run.Runs) == 1 && run.Runs[0].WorkflowID != ""
	}, time.Minute, 200*time.Millisecond, "the project becomes a run")
	wf := run.Runs[0].WorkflowID
	r.Track(wf)
	require.Equal(t, ids, run.Runs[0].Tasks)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The intake names the run when it claims the project; the activity
	// that starts it may still be on its way.
	require.Eventually(t, func() bool {
		_, err := r.Client.DescribeWorkflowExecution(ctx, wf, "")
		return err == nil
	}, time.Minute, 100*time.Millisecond, "the run %s started", wf)
	var doc runstatus.Status
	require.NoError(t, r.Client.GetWorkflow(ctx, wf, "").Get(ctx, &doc))
	require.Equal(t, runstatus.RunComplete, doc.Status)
	for _, id := range ids {
		require.Equal(t, runstatus.TaskDone, doc.Tasks[id].Status, id)
		require.Equal(t, 1, runsOf(t, r, id), "task %s started once, by the run", id)
	}
	require.False(t, doc.Tasks[ids[1]].StartedAt.Before(doc.Tasks[ids[0]].CompletedAt), "in dependency order")
	data, err := os.ReadFile(runact.RunStatusPath(r.WorkRoot, doc.PRDSlug))
	require.NoError(t, err, "status.json written")
	require.Contains(t, string(data), ids[1])
	waitKarvi(t, r, "completed", ids...)
}

// A project paused on the board pauses its run (a task whose dependency
// finished is held back), resumed it lets the run go on to its end.
func TestIntakeProjectPauseResume(t *testing.T) {
	r := intakeRigWith(t, "checks=pass delay=1s")
	ids := taskIDs("pause", 2)
	for _, id := range ids {
		r.Track(taskapi.WorkflowID(id))
	}
	postProjectRepo(t, r, "Paused project", "example/demo",
		map[string]any{"id": ids[0], "title": "First", "runtimeHint": "edda"},
		map[string]any{"id": ids[1], "title": "Second", "runtimeHint": "edda", "depends": []string{ids[0]}})
	projects := r.Karvi.ProjectIDs()
	require.Len(t, projects, 1)
	var wf string
	require.Eventually(t, func() bool {
		st := intakeStatus(t, r)
		if len(st.Runs) == 1 {
			wf = st.Runs[0].WorkflowID
		}
		return wf != "" && runsOf(t, r, ids[0]) == 1
	}, time.Minute, 200*time.Millisecond, "the run starts its first task")
	r.Track(wf)
	boardPost(t, r, "/api/projects/"+projects[0]+"/pause", map[string]any{})
	require.Eventually(t, func() bool {
		st := intakeStatus(t, r)
		return len(st.Runs) == 1 && st.Runs[0].Paused && st.Counts.Started == 1
	}, time.Minute, 200*time.Millisecond, "the intake pauses the run")

	// The first task ends; the paused run starts nothing more.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var first taskapi.Result
	require.NoError(t, r.Client.GetWorkflow(ctx, taskapi.WorkflowID(ids[0]), "").Get(ctx, &first))
	time.Sleep(4 * time.Second)
	require.Equal(t, 0, runsOf(t, r, ids[1]), "held back while the project is paused")

	boardPost(t, r, "/api/projects/"+projects[0]+"/resume", map[string]any{})
	var doc runstatus.Status
	require.NoError(t, r.Client.GetWorkflow(ctx, wf, "").Get(ctx, &doc))
	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Equal(t, runstatus.TaskDone, doc.Tasks[ids[1]].Status)
	recent := intakeStatus(t, r).Recent
	var kinds []string
	for _, n := range recent {
		if n.ProjectID != "" {
			kinds = append(kinds, string(n.Kind))
		}
	}
	require.Equal(t, []string{"start_run", "pause_run", "resume_run"}, kinds)
}

// A task whose fields make no valid plan is not started: it is blocked on
// karvi once, with the field named.
func TestIntakeBlocksABadTaskOnce(t *testing.T) {
	r := intakeRig(t)
	id := taskIDs("bad", 1)[0]
	r.Track(taskapi.WorkflowID(id))
	bad := eddaTask(id)
	bad["skill"] = "Go Dev!"
	postProject(t, r, "bad input", bad)
	waitKarvi(t, r, "blocked", id)
	tk, _ := r.Karvi.Task(id)
	require.NotNil(t, tk.Blocker)
	require.Contains(t, tk.Blocker.Reason, "task "+id+": skill")
	time.Sleep(5 * time.Second) // more reads of the board
	require.Equal(t, 0, runsOf(t, r, id), "not started")
	var blocks int
	for _, w := range r.Karvi.Writes(id) {
		if strings.Contains(string(w.Body), `"blocked"`) {
			blocks++
		}
	}
	require.Equal(t, 1, blocks, "blocked once")
	st := intakeStatus(t, r)
	require.Equal(t, 1, st.Counts.Blocked)
}

// One task of a run cancelled on the board is aborted, and the run does
// what it does for any aborted task: the task fails, its dependent is
// blocked, the rest of the run ends. A task that joins the project after
// its run started is refused, blocked on karvi with the reason, and never
// started.
func TestIntakeRunTaskCancelledAndLateTaskRefused(t *testing.T) {
	r := intakeRigWith(t, "checks=pass delay=100ms")
	ids := taskIDs("runcancel", 4)
	for _, id := range ids {
		r.Track(taskapi.WorkflowID(id))
	}
	postProjectRepo(t, r, "Run with a cancel", "example/demo",
		map[string]any{"id": ids[0], "title": "Slow", "runtimeHint": "edda", "description": "[sim phase=implement hang=forever]"},
		map[string]any{"id": ids[1], "title": "After slow", "runtimeHint": "edda", "depends": []string{ids[0]}},
		map[string]any{"id": ids[2], "title": "Quick", "runtimeHint": "edda"})
	projects := r.Karvi.ProjectIDs()
	require.Len(t, projects, 1)
	var wf string
	require.Eventually(t, func() bool {
		st := intakeStatus(t, r)
		if len(st.Runs) == 1 {
			wf = st.Runs[0].WorkflowID
		}
		return wf != "" && runsOf(t, r, ids[0]) == 1
	}, time.Minute, 200*time.Millisecond, "the run starts its first task")
	r.Track(wf)

	// A task that joins the project now (karvi's board written beside the
	// API does that) is refused with the reason.
	late := ids[3]
	require.NoError(t, r.Karvi.AddTask(karvifake.Task{ID: late, Title: "Late", Status: "dispatched",
		Fields: map[string]any{"runtimeHint": "edda", "projectId": projects[0], "depends": []any{}}}))
	waitKarvi(t, r, "blocked", late)
	tk, _ := r.Karvi.Task(late)
	require.NotNil(t, tk.Blocker)
	require.Contains(t, tk.Blocker.Reason, "task "+late+" joined project "+projects[0]+" after its run "+wf+" started")

	boardPost(t, r, "/api/tasks/"+ids[0]+"/cancel", map[string]any{"reason": "wrong approach"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var slow taskapi.Result
	require.NoError(t, r.Client.GetWorkflow(ctx, taskapi.WorkflowID(ids[0]), "").Get(ctx, &slow))
	require.Equal(t, mapping.PlanAborted, slow.Outcome.PlanStatus, "the run's task is aborted")
	var doc runstatus.Status
	require.NoError(t, r.Client.GetWorkflow(ctx, wf, "").Get(ctx, &doc))
	require.Equal(t, runstatus.RunPartial, doc.Status)
	require.Equal(t, runstatus.TaskFailed, doc.Tasks[ids[0]].Status)
	require.Equal(t, runstatus.TaskBlocked, doc.Tasks[ids[1]].Status)
	require.Equal(t, runstatus.TaskDone, doc.Tasks[ids[2]].Status)
	tk, _ = r.Karvi.Task(ids[0])
	require.Equal(t, "cancelled", tk.Status)
	require.Equal(t, 0, runsOf(t, r, late), "the late task is never started")
	require.Equal(t, 0, runsOf(t, r, ids[1]), "its dependent never starts")
	var aborted []string
	for _, n := range intakeStatus(t, r).Recent {
		if n.Kind == "abort" {
			aborted = append(aborted, n.TaskID+": "+n.Result)
		}
	}
	require.Equal(t, []string{ids[0] + ": sent abort to " + taskapi.WorkflowID(ids[0]) + " (a task of run " + wf + ")"}, aborted)
	keepIntakeHistory(t, r, "intake-run-cancel.json")
}

// A run's task sent back on the board after its run ended runs again on
// its own, with the next attempt in redispatch mode, and the intake says
// it runs outside the run; the run's status.json is not changed.
func TestIntakeRunTaskSentBackAfterItsRunRunsOnItsOwn(t *testing.T) {
	r := intakeRigWith(t, "checks=pass delay=100ms")
	id := taskIDs("runagain", 1)[0]
	r.Track(taskapi.WorkflowID(id))
	postProjectRepo(t, r, "Run then send back", "example/demo",
		map[string]any{"id": id, "title": "Only", "runtimeHint": "edda"})
	var wf string
	require.Eventually(t, func() bool {
		st := intakeStatus(t, r)
		if len(st.Runs) == 1 {
			wf = st.Runs[0].WorkflowID
		}
		return wf != "" && workflowExists(t, r, wf)
	}, time.Minute, 200*time.Millisecond, "the project becomes a run")
	r.Track(wf)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var doc runstatus.Status
	require.NoError(t, r.Client.GetWorkflow(ctx, wf, "").Get(ctx, &doc))
	require.Equal(t, runstatus.RunComplete, doc.Status)
	waitKarvi(t, r, "completed", id)
	waitClaimEnded(t, r, id)

	sendBack(t, r, id)
	require.Eventually(t, func() bool { return runsOf(t, r, id) == 2 }, time.Minute, 300*time.Millisecond, "a second run")
	var res taskapi.Result
	require.NoError(t, r.Client.GetWorkflow(ctx, taskapi.WorkflowID(id), "").Get(ctx, &res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 2, res.Attempt)
	require.Equal(t, "redispatch", string(res.Dispatch.Mode))
	waitKarvi(t, r, "completed", id)
	var results []string
	for _, n := range intakeStatus(t, r).Recent {
		if n.Kind == "redispatch" {
			results = append(results, n.Result)
		}
	}
	require.Len(t, results, 1)
	require.Contains(t, results[0], "outside run "+wf)
	var after runstatus.Status
	require.NoError(t, r.Client.GetWorkflow(ctx, wf, "").Get(ctx, &after))
	require.Equal(t, doc.Tasks[id].Status, after.Tasks[id].Status, "the run's document is not changed")
}

// A run's task that failed while its run still runs, sent back on the
// board (blocked -> in_progress), is retried by its run: the run starts
// it again under the same id and the intake says it asked the run.
func TestIntakeRunTaskFailedSentBackIsRetriedByItsRun(t *testing.T) {
	r := intakeRigWith(t, "checks=pass delay=100ms")
	ids := taskIDs("runretry", 2)
	for _, id := range ids {
		r.Track(taskapi.WorkflowID(id))
	}
	postProjectRepo(t, r, "Run with a failure", "example/demo",
		map[string]any{"id": ids[0], "title": "Failing", "runtimeHint": "edda", "description": "[sim phase=test fail]"},
		map[string]any{"id": ids[1], "title": "Slow", "runtimeHint": "edda", "description": "[sim phase=implement hang=forever]"})
	var wf string
	require.Eventually(t, func() bool {
		st := intakeStatus(t, r)
		if len(st.Runs) == 1 {
			wf = st.Runs[0].WorkflowID
		}
		return wf != "" && workflowExists(t, r, wf)
	}, time.Minute, 200*time.Millisecond, "the project becomes a run")
	r.Track(wf)
	runDoc := func() runstatus.Status { return testrig.Query[runstatus.Status](r, wf, runapi.QueryStatus) }
	require.Eventually(t, func() bool { return runDoc().Tasks[ids[0]].Status == runstatus.TaskFailed },
		2*time.Minute, 300*time.Millisecond, "the task fails in its run")
	waitKarvi(t, r, "blocked", ids[0])
	waitClaimEnded(t, r, ids[0])

	// The run ran it as several workflow runs of its id (its loops).
	before := runsOf(t, r, ids[0])
	boardPost(t, r, "/api/tasks/"+ids[0]+"/status", map[string]any{"status": "in_progress"})
	require.Eventually(t, func() bool { return runsOf(t, r, ids[0]) > before }, time.Minute, 300*time.Millisecond, "the run starts it again")
	// The run may start it before the intake has recorded its action's
	// answer: wait for that answer, then check there is one.
	var results []string
	require.Eventually(t, func() bool {
		results = nil
		for _, n := range intakeStatus(t, r).Recent {
			if n.Kind == "redispatch" {
				results = append(results, n.Result)
			}
		}
		return len(results) > 0
	}, time.Minute, 200*time.Millisecond, "the intake recorded the send-back's answer")
	require.Equal(t, []string{"retried task " + ids[0] + " in run " + wf}, results)
}
