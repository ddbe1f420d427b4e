//go:build realserver

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/karvifake"
	"karvi-edda-temporal/testkit/testrig"
)

// A board task whose workflow id ran here before is run: here the task
// was first run by hand (`starter start`), then karvi dropped it and a new
// task of the same id was dispatched to this runtime, as on a board
// restored or replaced with the ids karvi reuses. The intake starts the
// board's task anew after the closed workflow, at the next attempt, and
// follows it to its end; it does not take the old end for the new task's.
func TestIntakeRunsABoardTaskWhoseIDRanBefore(t *testing.T) {
	r := intakeRig(t)
	id := taskIDs("reused", 1)[0]
	r.Track(taskapi.WorkflowID(id))
	r.Workspace(id)
	first := r.Result(r.Start(testrig.Dispatch(t, id, "Run by hand first. "+testrig.ExampleCosts)))
	require.EqualValues(t, "completed", first.Outcome.TaskStatus)
	require.True(t, r.Karvi.DeleteTask(id))

	postProject(t, r, "same id again", eddaTask(id))
	require.Eventually(t, func() bool { return runsOf(t, r, id) == 2 }, time.Minute, 300*time.Millisecond,
		"the board's task runs: a second workflow of %s", taskapi.WorkflowID(id))
	waitKarvi(t, r, "completed", id)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res taskapi.Result
	require.NoError(t, r.Client.GetWorkflow(ctx, taskapi.WorkflowID(id), "").Get(ctx, &res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 2, res.Attempt, "the attempt after the closed workflow's")
	require.Contains(t, res.Dispatch.Message, "Task "+id)
	waitClaimEnded(t, r, id)
	var starts []string
	for _, n := range intakeStatus(t, r).Recent {
		if n.Kind == "start" && n.TaskID == id {
			starts = append(starts, n.Result)
		}
	}
	require.Len(t, starts, 1)
	require.Contains(t, starts[0], "already ran")
}

// Two boards on one namespace never touch each other's tasks. A worker
// asked to follow a second board there refuses, naming both boards. An
// intake of the second board that runs anyway (started by hand, or at the
// same moment as the first) finds board A's running workflow under its
// own task's id: it blocks its task on its board with the reason rather
// than adopting A's run, and a cancel on board B does not abort board A's
// task; a cancel on board A does.
func TestIntakeTwoBoardsNeverTouchEachOthersTasks(t *testing.T) {
	r := intakeRigWith(t, "checks=pass")
	kb := karvifake.New(karvifake.Options{Token: karviToken})
	urlB, err := kb.Start()
	require.NoError(t, err)
	t.Cleanup(kb.Close)
	intakeA, intakeB := intakeapi.WorkflowID(r.Karvi.URL()), intakeapi.WorkflowID(urlB)

	// A worker for board B on this namespace refuses to start.
	sim, err := devenv.Binary("eddasim")
	require.NoError(t, err)
	workerBin, err := devenv.Binary("worker")
	require.NoError(t, err)
	templates, err := testrig.TemplatesDir()
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer wcancel()
	cmd := exec.CommandContext(wctx, workerBin, "-address", r.Server.Addr, "-namespace", r.Server.Namespace,
		"-task-queue", r.Queue+"-b", "-work-root", filepath.Join(t.TempDir(), "work"), "-conductor", sim,
		"-templates", templates, "-sink", "karvi", "-karvi-url", urlB, "-intake-karvi")
	cmd.Env = append(cmd.Environ(), "KARVI_API_TOKEN="+karviToken)
	r.Track(intakeB)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the worker of a second board refuses to start: %s", out)
	require.NoError(t, wctx.Err(), "it refused, it was not killed by the test's deadline: %s", out)
	for _, want := range []string{"the karvi intake of board " + r.Karvi.URL(), intakeA, "one namespace follows one board", urlB} {
		require.Contains(t, string(out), want)
	}

	// An intake of board B runs anyway, beside A's, on the same workers.
	_, err = r.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: intakeB, TaskQueue: r.Queue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, intakeapi.WorkflowName, intakeapi.Input{BoardURL: urlB, Poll: 2 * time.Second})
	require.NoError(t, err)

	id := taskIDs("twoboards", 1)[0]
	r.Track(taskapi.WorkflowID(id))
	r.Workspace(id)
	onA := eddaTask(id)
	onA["description"] = "Board A's task. [sim phase=implement hang=forever]"
	postProject(t, r, "board A", onA)
	waitKarvi(t, r, "in_progress", id)
	require.Equal(t, 1, runsOf(t, r, id))

	onB := eddaTask(id)
	onB["description"] = "Board B's task of the same id."
	postTo(t, urlB, "/api/projects", map[string]any{"title": "board B", "tasks": []any{onB}}, http.StatusCreated)
	statusB := func() intakeapi.Status { return testrig.Query[intakeapi.Status](r, intakeB, intakeapi.QueryStatus) }
	require.Eventually(t, func() bool {
		for _, c := range statusB().Claims {
			if c.TaskID == id {
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, "board B's intake takes its task %s", id)

	// Board B's task is blocked, with a reason that names the conflict.
	var tb karvifake.Task
	require.Eventually(t, func() bool {
		tb, _ = kb.Task(id)
		return tb.Status == "blocked"
	}, time.Minute, 200*time.Millisecond, "board B's task is blocked")
	require.NotNil(t, tb.Blocker)
	require.Contains(t, tb.Blocker.Reason, "workflow "+taskapi.WorkflowID(id)+" is already running")
	require.Contains(t, tb.Blocker.Reason, "not started by this intake")
	require.Contains(t, tb.Blocker.Reason, "the karvi intake "+intakeA)

	// A cancel on board B, read by B's intake: A's task runs on.
	postTo(t, urlB, "/api/tasks/"+id+"/cancel", map[string]any{"reason": "not on this board"}, http.StatusOK)
	// The cancel asks nothing of B's intake, so its follower passes the
	// board over; a skip it must show brings it a board past the cancel.
	require.NoError(t, kb.AddTask(karvifake.Task{ID: "other-" + id, Title: "not ours", Status: "cancelled",
		Fields: map[string]any{"runtimeHint": "openclaw"}}))
	cancelled := kb.Version()
	require.Eventually(t, func() bool { return statusB().Version >= int64(cancelled) }, time.Minute, 200*time.Millisecond,
		"board B's intake read the cancel")
	require.Never(t, func() bool {
		desc, err := r.Client.DescribeWorkflowExecution(context.Background(), taskapi.WorkflowID(id), "")
		return err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, 6*time.Second, 300*time.Millisecond, "board A's task is not aborted by a cancel on board B")
	require.Equal(t, 1, runsOf(t, r, id), "board B's task did not start a workflow of its own either")

	var refused bool
	for _, c := range statusB().Claims {
		refused = refused || c.TaskID == id && c.Phase == "refused"
	}
	require.True(t, refused, "board B's intake holds no running claim on it")

	// A cancel on board A aborts A's task.
	boardPost(t, r, "/api/tasks/"+id+"/cancel", map[string]any{"reason": "done with it"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res taskapi.Result
	require.NoError(t, r.Client.GetWorkflow(ctx, taskapi.WorkflowID(id), "").Get(ctx, &res))
	require.Equal(t, mapping.PlanAborted, res.Outcome.PlanStatus)
	require.True(t, strings.HasPrefix(res.Dispatch.Message, "Task "+id+"\n\nBoard A's task."), "board A's: %q", res.Dispatch.Message)
}

// postTo posts body to a route of the karvi at url as a board user does.
func postTo(t *testing.T, url, path string, body any, want int) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+karviToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, want, resp.StatusCode, "POST %s%s", url, path)
}
