//go:build realserver

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// startInput decodes the input a workflow was started with.
func startInput(t *testing.T, r *testrig.Rig, workflowID string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := r.Client.GetWorkflowHistory(ctx, workflowID, "", false, 0)
	require.True(t, it.HasNext(), "history of %s", workflowID)
	ev, err := it.Next()
	require.NoError(t, err)
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	require.NotNil(t, attrs, "first event of %s", workflowID)
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), v))
}

// One KARVI_EDDA_TIME_SCALE scales a whole deployment: the worker starts
// its intake at the scale (its poll scaled), the board's task the intake
// starts and a task the starter starts both carry it, and with the karvi
// fake at the same scale both run to their end.
func TestOneTimeScaleScalesTheDeployment(t *testing.T) {
	r := testrig.New(t, testrig.Options{Sink: "karvi", KarviToken: karviToken, KarviTimeScale: 60,
		Env: []string{"KARVI_EDDA_TIME_SCALE=60"}, WorkerArgs: []string{"-intake-karvi"}})
	r.Karvi.SetFeedHeartbeat(time.Second)
	intakeID := intakeapi.WorkflowID(r.Karvi.URL())
	r.Track(intakeID)
	require.Eventually(t, func() bool {
		_, err := r.Client.DescribeWorkflowExecution(context.Background(), intakeID, "")
		return err == nil
	}, time.Minute, 100*time.Millisecond, "the worker starts the intake")
	var intakeIn intakeapi.Input
	startInput(t, r, intakeID, &intakeIn)
	require.Equal(t, 60.0, intakeIn.TimeScale)
	require.Equal(t, intakeapi.DefaultPoll/60, intakeIn.Poll)

	ids := taskIDs("ts", 2)
	board, started := ids[0], ids[1]
	r.Track(taskapi.WorkflowID(board))
	r.Workspace(board)
	postProject(t, r, "time scale", eddaTask(board))

	// A task the starter starts, on the same board, as a user would.
	r.Workspace(started)
	r.AddKarviTask(started)
	data, err := json.Marshal(testrig.Dispatch(t, started, "Add user authentication with JWT."))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "dispatch.json")
	require.NoError(t, os.WriteFile(file, data, 0o644))
	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	cmd := exec.Command(bin, "start", "-address", r.Server.Addr, "-namespace", r.Server.Namespace, "-task-queue", r.Queue, file)
	cmd.Env = append(os.Environ(), "KARVI_EDDA_TIME_SCALE=60")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	r.Track(taskapi.WorkflowID(started))

	waitKarvi(t, r, "completed", board, started)
	for _, id := range ids {
		var in taskapi.TaskInput
		startInput(t, r, taskapi.WorkflowID(id), &in)
		require.NotNil(t, in.Tuning, id)
		require.Equal(t, 60.0, in.Tuning.TimeScale, id)
		var res taskapi.Result
		require.NoError(t, r.Client.GetWorkflow(context.Background(), taskapi.WorkflowID(id), "").Get(context.Background(), &res))
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, id)
	}
	require.Empty(t, intakeStatus(t, r).Problem)
}
