package runflow

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/runstatus"
)

// Signals from the tasks that come in the same workflow task as the
// hand-over (here with the answer of the status write before it) are in
// the state handed over: the root coroutine runs first in a workflow task
// and hands over before any other coroutine could take them, so a pause,
// a stall, a spend or an early end left to a coroutine was lost.
func TestRunSignalsWithTheHandOverAreCarried(t *testing.T) {
	f := &fakeTasks{took: map[string]time.Duration{"a": time.Hour, "b": time.Hour, "c": time.Hour, "d": time.Hour}}
	env, root := runEnv(t, f)
	writer := &runact.Activities{Config: activities.Config{WorkRoot: root}}
	var once sync.Once
	env.OnActivity(runActs.WriteRunStatus, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req runact.RunStatusRequest) (runact.RunStatusResult, error) {
			// The write of the four tasks started is the last before the
			// hand-over: four starts are the most the run may make
			// before it continues as new.
			if d, ok := req.Tasks["d"]; ok && strings.Contains(string(d), `"status":"running"`) {
				// The four task workflows tell the run they started
				// before they run; the run has their run ids, and hands
				// over with this write's answer.
				if err := f.waitForCalls(4); err != nil {
					return runact.RunStatusResult{}, err
				}
				once.Do(func() {
					at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
					env.SignalWorkflowSkippingWorkflowTask(taskapi.SignalTaskPause,
						taskapi.TaskPause{Task: "b", Attempt: 1, Paused: true, Reason: string(runstatus.PausedUsageLimit), At: at})
					env.SignalWorkflowSkippingWorkflowTask(taskapi.SignalTaskStall,
						taskapi.TaskStall{Task: "c", Attempt: 1, Stalled: true, Phase: "implement", At: at})
					env.SignalWorkflowSkippingWorkflowTask(taskapi.SignalTaskSpend,
						taskapi.TaskSpend{Task: "c", Attempt: 1, CostUSD: 0.3})
					env.SignalWorkflowSkippingWorkflowTask(taskapi.SignalTaskEnded,
						taskapi.TaskEnded{Task: "d", Attempt: 1, Reached: 1, Summary: "d done", CostUSD: 0.25})
				})
			}
			return writer.WriteRunStatus(ctx, req)
		})
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(`{"title":"Wide","slug":"wide","concurrency":4,"tasks":[
		{"id":"a","title":"A"},{"id":"b","title":"B"},{"id":"c","title":"C"},{"id":"d","title":"D"},{"id":"e","title":"E"}]}`),
		ContinueAsNewAfter: 4})
	st := handedOver(t, env)
	require.Equal(t, runstatus.TaskRunning, st.Doc.Tasks["a"].Status)
	require.Equal(t, runstatus.TaskPaused, st.Doc.Tasks["b"].Status, "the pause of b was lost")
	require.Equal(t, runstatus.PausedUsageLimit, st.Doc.Tasks["b"].PausedReason)
	require.Equal(t, "implement", st.Doc.Tasks["c"].StalledPhase, "the stall of c was lost")
	require.InDelta(t, 0.3, st.Tasks["c"].Spend, 1e-9, "the spend of c was lost")
	require.Equal(t, runstatus.TaskDone, st.Doc.Tasks["d"].Status, "the early end of d was lost")
	require.False(t, st.Tasks["d"].Running)
	require.InDelta(t, 0.25, st.Spent.TotalUSD, 1e-9, "d ended with $0.25")
	require.Equal(t, runstatus.TaskQueued, st.Doc.Tasks["e"].Status)
}

// waitForCalls waits, in real time, for n task workflows to have begun.
func (f *fakeTasks) waitForCalls(n int) error {
	for range 1000 {
		f.mu.Lock()
		got := len(f.calls)
		f.mu.Unlock()
		if got >= n {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%d task workflows began, not %d", len(f.calls), n)
}

// A task's report reaches status.json even when nothing else changes for
// hours (a task paused on a usage limit waits for its reset): a pause that
// comes while status.json is being written (with the write's answer) is
// not in that write, so the next one carries it; a stall is written too.
func TestRunTaskReportsReachStatusJSON(t *testing.T) {
	f := &fakeTasks{took: map[string]time.Duration{"a": 3 * time.Hour, "b": 3 * time.Hour}}
	env, root := runEnv(t, f)
	writer := &runact.Activities{Config: activities.Config{WorkRoot: root}}
	var once sync.Once
	env.OnActivity(runActs.WriteRunStatus, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req runact.RunStatusRequest) (runact.RunStatusResult, error) {
			if b, ok := req.Tasks["b"]; ok && strings.Contains(string(b), `"status":"running"`) {
				once.Do(func() {
					env.SignalWorkflowSkippingWorkflowTask(taskapi.SignalTaskPause, taskapi.TaskPause{Task: "b", Attempt: 1,
						Paused: true, Reason: string(runstatus.PausedUsageLimit), At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
				})
			}
			return writer.WriteRunStatus(ctx, req)
		})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalTaskStall, taskapi.TaskStall{Task: "a", Attempt: 1, Stalled: true,
			Phase: "implement", At: time.Date(2026, 1, 2, 3, 14, 5, 0, time.UTC)})
	}, 10*time.Minute)
	var onDisk runstatus.Status
	env.RegisterDelayedCallback(func() {
		data, err := os.ReadFile(filepath.Join(root, "prds", "pair", "status.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &onDisk))
	}, time.Hour)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(`{"title":"Pair","slug":"pair","concurrency":2,"tasks":[
		{"id":"a","title":"A"},{"id":"b","title":"B"}]}`)})
	runResult(t, env)
	require.Equal(t, runstatus.TaskPaused, onDisk.Tasks["b"].Status, "status.json an hour after b paused")
	require.Equal(t, runstatus.PausedUsageLimit, onDisk.Tasks["b"].PausedReason)
	require.Equal(t, "implement", onDisk.Tasks["a"].StalledPhase, "status.json 50 minutes after a stalled")
}

// The root coroutine runs first in a workflow task. Resumed by an
// activity's answer that came with a task's signal, it sees the signal
// only by taking it itself: a listener blocked in Receive (runs recorded
// before versionSignalsBuffered) already holds it, unapplied, and a
// hand-over at that moment would go without it.
func TestTheHandOverTakesTheSignalsNoListenerTookYet(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffered=%v", buffered), func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			probe := func(ctx workflow.Context) (int, error) {
				r := &runFlow{ctx: ctx, log: workflow.GetLogger(ctx), signalsBuffered: buffered}
				spent := 0
				listen(r, taskapi.SignalTaskSpend, func(taskapi.TaskSpend) { spent++ })
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
				if err := workflow.ExecuteActivity(ctx, "Report").Get(ctx, nil); err != nil {
					return 0, err
				}
				r.takeSignals()
				return spent, nil
			}
			env.RegisterWorkflowWithOptions(probe, workflow.RegisterOptions{Name: "probe"})
			env.RegisterActivityWithOptions(func(context.Context) error {
				env.SignalWorkflowSkippingWorkflowTask(taskapi.SignalTaskSpend, taskapi.TaskSpend{Task: "a", Attempt: 1, CostUSD: 0.1})
				return nil
			}, activity.RegisterOptions{Name: "Report"})
			env.ExecuteWorkflow("probe")
			require.NoError(t, env.GetWorkflowError())
			var spent int
			require.NoError(t, env.GetWorkflowResult(&spent))
			want := 0 // held by the listener, out of the root's sight
			if buffered {
				want = 1
			}
			require.Equal(t, want, spent)
		})
	}
}
