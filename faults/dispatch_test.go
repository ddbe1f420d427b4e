//go:build realserver

package faults

// Bad DispatchPlan input: every case goes through the
// starter binary (non-zero exit, an error naming the field) and, when it is
// JSON at all, straight to the workflow through a client (the workflow
// fails at once, non-retryable, naming the field). Afterwards nothing runs
// on the task queue, no conductor was started, and nothing was written
// outside the work root.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

type badDispatch struct {
	name string
	// json is the dispatch; {ID} becomes a task id unique to the path
	// (starter or client), so the two paths never share a workflow.
	json string
	// field is what both errors must name.
	field string
	// starterSays is the starter's wording when it differs from field
	// (documents that are not JSON objects have no field to name).
	starterSays string
	// atPrepare: the dispatch is valid on its own and only the worker can
	// refuse it (its templates, its work root), in PreparePlan.
	atPrepare bool
}

// base is a valid dispatch body to which a case adds or overrides members.
func withBase(extra string) string {
	return `{"kind":"task_dispatch","taskId":"{ID}","message":"Do the thing.","skill":"sequential"` + extra + `}`
}

func badDispatches() []badDispatch {
	big := strings.Repeat("m", 10<<20)
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	return []badDispatch{
		{name: "empty file", json: "", starterSays: "empty input"},
		{name: "not JSON", json: "taskId=T1 message=hello", starterSays: "not valid JSON"},
		{name: "truncated JSON", json: `{"taskId":"{ID}","message":"m"`, starterSays: "not valid JSON"},
		{name: "byte order mark", json: "\xef\xbb\xbf" + withBase(""), starterSays: "not valid JSON"},
		{name: "nested 10001 deep", json: `{"taskId":"{ID}","message":"m","steps":` + deep + `}`, starterSays: "not valid JSON"},
		{name: "array", json: `[{"taskId":"{ID}"}]`, starterSays: "must be a JSON object, got array"},
		{name: "string", json: `"dispatch"`, starterSays: "must be a JSON object, got string"},
		{name: "null", json: `null`, starterSays: "must be a JSON object, got null"},
		{name: "empty object", json: `{}`, field: "taskId"},
		{name: "missing taskId", json: `{"message":"Do the thing."}`, field: "taskId"},
		{name: "empty taskId", json: `{"taskId":"","message":"Do the thing."}`, field: "taskId"},
		{name: "taskId number", json: `{"taskId":5,"message":"Do the thing."}`, field: "taskId"},
		{name: "taskId ../", json: `{"taskId":"../etc","message":"Do the thing."}`, field: "taskId"},
		{name: "taskId with /", json: `{"taskId":"a/b","message":"Do the thing."}`, field: "taskId"},
		{name: "taskId absolute", json: `{"taskId":"/etc/passwd","message":"Do the thing."}`, field: "taskId"},
		{name: "taskId ..", json: `{"taskId":"..","message":"Do the thing."}`, field: "taskId"},
		{name: "taskId space", json: `{"taskId":"T 1","message":"Do the thing."}`, field: "taskId"},
		{name: "taskId NUL", json: `{"taskId":"T\u0000","message":"Do the thing."}`, field: "taskId"},
		{name: "taskId 65 chars", json: `{"taskId":"` + strings.Repeat("t", 65) + `","message":"Do the thing."}`, field: "taskId"},
		{name: "taskId duplicate key", json: `{"taskId":"{ID}","taskId":"../x","message":"Do the thing."}`, field: "taskId"},
		{name: "missing message", json: `{"taskId":"{ID}"}`, field: "message"},
		{name: "blank message", json: `{"taskId":"{ID}","message":"  \n\t "}`, field: "message"},
		{name: "message array", json: `{"taskId":"{ID}","message":["a"]}`, field: "message"},
		{name: "message 10 MB", json: `{"taskId":"{ID}","message":"` + big + `"}`, field: "message"},
		{name: "timeoutSec negative", json: withBase(`,"timeoutSec":-1`), field: "timeoutSec"},
		{name: "timeoutSec absurd", json: withBase(`,"timeoutSec":999999999`), field: "timeoutSec"},
		{name: "timeoutSec fraction", json: withBase(`,"timeoutSec":1.5`), field: "timeoutSec"},
		{name: "timeoutSec string", json: withBase(`,"timeoutSec":"300"`), field: "timeoutSec"},
		{name: "timeoutSec overflow", json: withBase(`,"timeoutSec":1e400`), field: "timeoutSec"},
		{name: "mode unknown", json: withBase(`,"mode":"sideways"`), field: "mode"},
		{name: "planId with /", json: withBase(`,"planId":"a/b"`), field: "planId"},
		{name: "skill pattern", json: `{"taskId":"{ID}","message":"m","skill":"../x"}`, field: "skill"},
		{name: "skill unknown template", json: `{"taskId":"{ID}","message":"m","skill":"no-such-template"}`, field: "skill", atPrepare: true},
		{name: "max_review_attempts 0", json: withBase(`,"controlsSnapshot":{"max_review_attempts":0}`), field: "controlsSnapshot.max_review_attempts"},
		{name: "max_review_attempts 1000", json: withBase(`,"controlsSnapshot":{"max_review_attempts":1000}`), field: "controlsSnapshot.max_review_attempts"},
		{name: "controlsSnapshot string", json: withBase(`,"controlsSnapshot":"yes"`), field: "controlsSnapshot"},
		{name: "artifact without id", json: withBase(`,"artifacts":[{"title":"x"}]`), field: "artifacts[0].id"},
		{name: "artifacts object", json: withBase(`,"artifacts":{"id":"x"}`), field: "artifacts"},
		{name: "requiredSkills blank", json: withBase(`,"requiredSkills":[""]`), field: "requiredSkills[0]"},
		{name: "version string", json: withBase(`,"version":"one"`), field: "version"},
		{name: "workingDir escapes", json: withBase(`,"workingDir":"../../etc"`), field: "workingDir", atPrepare: true},
	}
}

// rawInput is TaskInput with the dispatch as raw JSON, so a client can send
// what the typed struct could never hold (wrong types).
type rawInput struct {
	Dispatch json.RawMessage `json:"dispatch"`
}

func TestBadDispatchInput(t *testing.T) {
	t.Parallel()
	r := newRig(t, testrig.Options{Scenario: "checks=pass"})
	starter, err := devenv.Binary("starter")
	require.NoError(t, err)
	cases := badDispatches()
	require.GreaterOrEqual(t, len(cases), 25)

	files := t.TempDir()
	for i, c := range cases {
		data := strings.ReplaceAll(c.json, "{ID}", fmt.Sprintf("S%02d", i))
		require.NoError(t, os.WriteFile(filepath.Join(files, fmt.Sprintf("%02d.json", i)), []byte(data), 0o644))
	}
	dup := filepath.Join(files, "dup.json")
	require.NoError(t, os.WriteFile(dup, []byte(`{"taskId":"DUP","skill":"sequential",`+
		`"message":"Runs until aborted. [sim phase=implement hang=forever]"}`), 0o644))
	// Everything but the work root, the sink and the worker's log must
	// stay as it is.
	top := filepath.Dir(r.Dir)
	skip := []string{r.WorkRoot, r.SinkDir, filepath.Join(r.Dir, "worker-1.log")}
	before := snapshotTree(t, top, skip...)

	// Through the starter: a non-zero exit and the field named. Cases only
	// the worker can refuse start a workflow; -follow reports its failure.
	for i, c := range cases {
		out, err := exec.Command(starter, "start", "-follow", "-address", r.Server.Addr, "-task-queue", r.Queue,
			filepath.Join(files, fmt.Sprintf("%02d.json", i))).CombinedOutput()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "case %q: starter must fail, got %v: %s", c.name, err, out)
		want := c.starterSays
		if want == "" {
			want = c.field
		}
		require.Contains(t, string(out), want, "case %q", c.name)
		if c.atPrepare {
			// The worker refused it: the workflow started, then failed, and
			// the starter reports the root cause, not the wrapper chain.
			require.Contains(t, string(out), "started karvi-task-", "case %q", c.name)
			require.NotContains(t, string(out), "workflow execution error", "case %q", c.name)
		}
		t.Logf("starter, %s: %s", c.name, shortOut(out))
	}

	// Straight to the workflow with a client, for every case that is JSON.
	ids := map[string]badDispatch{}
	for i, c := range cases {
		raw := strings.ReplaceAll(c.json, "{ID}", fmt.Sprintf("D%02d", i))
		if !json.Valid([]byte(raw)) {
			continue
		}
		id := fmt.Sprintf("faults-bad-dispatch-%02d", i)
		_, err := r.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: id, TaskQueue: r.Queue}, taskapi.TaskWorkflowName, rawInput{Dispatch: json.RawMessage(raw)})
		if c.name == "message 10 MB" {
			// Temporal refuses a start this large before any workflow exists.
			require.Error(t, err, "a 10 MB input is refused")
			t.Logf("client, %s: start refused: %v", c.name, err)
			continue
		}
		require.NoError(t, err, "case %q", c.name)
		r.Track(id)
		ids[id] = c
	}
	require.GreaterOrEqual(t, len(ids), 25)
	for id, c := range ids {
		run := r.Client.GetWorkflow(context.Background(), id, "")
		_, err := r.ResultErr(run)
		require.Error(t, err, "case %q", c.name)
		msg := err.Error()
		require.Contains(t, msg, c.field, "case %q", c.name)
		if app := findAppError(err, activities.ErrInvalidDispatch); app != nil {
			require.True(t, app.NonRetryable(), "case %q", c.name)
		} else {
			// Only a wrong JSON type fails before the workflow's own check:
			// the SDK cannot decode the input, and names the Go field path.
			require.Contains(t, msg, "unable to decode the workflow function input", "case %q: %v", c.name, err)
		}
		requireFailedFast(t, r, id, c)
	}

	// A second start for a task whose workflow runs is refused by both.
	out, err := exec.Command(starter, "start", "-address", r.Server.Addr, "-task-queue", r.Queue, dup).CombinedOutput()
	require.NoError(t, err, "%s", out)
	r.Track(taskapi.WorkflowID("DUP"))
	r.WaitPhase("DUP", "implement")
	out, err = exec.Command(starter, "start", "-address", r.Server.Addr, "-task-queue", r.Queue, dup).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "task DUP already has a running workflow")
	_, err = r.TryStart(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "DUP", "again")})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	require.True(t, errors.As(err, &already), "client start of a running task: %v", err)
	out, err = exec.Command(starter, "abort", "-address", r.Server.Addr, "DUP").CombinedOutput()
	require.NoError(t, err, "%s", out)
	res := r.Result(r.Client.GetWorkflow(context.Background(), taskapi.WorkflowID("DUP"), ""))
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)

	// The end state: nothing runs on the queue, the one conductor (DUP's)
	// is gone, and nothing outside the work root changed.
	requireQueueIdle(t, r)
	hs, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.Len(t, hs, 1, "only the duplicate-start case ran a conductor")
	assertNoConductorGroups(t, r)
	require.Equal(t, before, snapshotTree(t, top, skip...), "files outside the work root changed")
	entries, err := os.ReadDir(r.SinkDir)
	require.NoError(t, err)
	for _, e := range entries {
		require.Equal(t, "DUP", e.Name(), "a refused dispatch reached the sink")
	}
}

// requireFailedFast: the workflow ended on its first try. A dispatch the
// workflow itself refuses schedules no activity; one only the worker can
// refuse runs PreparePlan once, and nothing after it.
func requireFailedFast(t *testing.T, r *rig, workflowID string, c badDispatch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := r.Client.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var scheduled []string
	failed := false
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled = append(scheduled, ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			require.EqualValues(t, 1, ev.GetActivityTaskStartedEventAttributes().GetAttempt(), "case %q retried an activity", c.name)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			t.Fatalf("case %q: workflow task failed: %v", c.name, ev.GetWorkflowTaskFailedEventAttributes())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			failed = true
		}
	}
	require.True(t, failed, "case %q: workflow failed", c.name)
	if c.atPrepare {
		// The host claim (its only side effect: the task joins its
		// worker's account) comes before the start that refuses.
		require.Equal(t, []string{"ClaimHost", "StartAttempt"}, scheduled, "case %q", c.name)
	} else {
		require.Empty(t, scheduled, "case %q", c.name)
	}
}

// requireQueueIdle waits until visibility reports no running workflow on
// the rig's queue (visibility lags; the deadline is a safety net) and
// checks each workflow the rig started directly. The queue's agent account
// (the one its worker gives tasks that name none) runs until stopped.
func requireQueueIdle(t *testing.T, r *rig) {
	t.Helper()
	query := fmt.Sprintf(`TaskQueue = %q AND ExecutionStatus = "Running" AND WorkflowType != %q`, r.Queue, accountapi.WorkflowName)
	wait.EventuallyEvery(t, time.Minute, 100*time.Millisecond, "no workflow running on "+r.Queue, func() (any, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := r.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: r.Server.Namespace, Query: query})
		cancel()
		require.NoError(t, err)
		return fmt.Sprintf("%d workflows still running", resp.GetCount()), resp.GetCount() == 0
	})
	for _, id := range r.Started() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		desc, err := r.Client.DescribeWorkflowExecution(ctx, id, "")
		cancel()
		require.NoError(t, err)
		require.NotEqual(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus(), "%s", id)
	}
}

func shortOut(out []byte) string {
	s := strings.Join(strings.Fields(string(out)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
