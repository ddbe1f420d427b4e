//go:build realserver

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/workflows"
)

// A run with a $0.50 block budget whose tasks cost $0.60 each: once the
// running tasks' spending passes the budget they are aborted with
// "Budget exceeded ($X spent of $0.50)", on their briefs and in
// status.json, and no other task starts.
func TestRunBudgetBlocksTheRun(t *testing.T) {
	t.Parallel()
	// Two tasks at once, $0.20 a phase of 2 s: after their second phases
	// they have spent $0.80, with a phase each still to go; that last phase
	// (test: ties in phase order go by id, so implement, docs, test) lasts
	// a minute, so the abort lands in it however slow the server.
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=2s cost=0.20; phase=test delay=60s"})
	runFile := `{"slug":"bud","title":"Budget","concurrency":2,"tasks":[
	 {"id":"bud-a","title":"A"},{"id":"bud-b","title":"B"},
	 {"id":"bud-c","title":"C","depends":["bud-a"]},{"id":"bud-d","title":"D"}]}`
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile),
		Budget: &costs.Budget{LimitUSD: 0.5, Action: costs.Block},
		Tuning: &taskapi.Tuning{CheckpointEvery: 100 * time.Millisecond}})
	doc := r.RunResult(wr, 2*time.Minute)

	require.Equal(t, runstatus.RunPartial, doc.Status)
	for _, id := range []string{"bud-a", "bud-b"} {
		task := doc.Tasks[id]
		require.Equal(t, runstatus.TaskFailed, task.Status, id)
		var spent float64
		_, err := fmt.Sscanf(task.Error, "Budget exceeded ($%f spent of $0.50)", &spent)
		require.NoError(t, err, "%s: %q", id, task.Error)
		require.GreaterOrEqual(t, spent, 0.5, id)
		res := r.Result(r.Client.GetWorkflow(t.Context(), runapi.TaskWorkflowID(id), ""))
		require.Equal(t, mapping.TaskBlocked, res.Outcome.TaskStatus, id)
		require.Equal(t, 3, res.Brief.Plan.TotalPhases)
		require.Less(t, res.Brief.CompletedPhases, 3, "%s: the budget stopped it before its plan finished", id)
	}
	require.Equal(t, runstatus.TaskBlocked, doc.Tasks["bud-c"].Status)
	require.Equal(t, runstatus.TaskQueued, doc.Tasks["bud-d"].Status, "no task starts once the budget is spent")
	require.Empty(t, r.LiveConductors())

	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	out, err := exec.Command(bin, "-address", r.Server.Addr, "cost", "bud").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "of a $0.50 budget (block at 100 %): spent")
	require.Contains(t, string(out), "sonnet")
}

// A task with its own $0.30 block budget, $0.20 a phase, is stopped at the
// first checkpoint past it; one with a $0.45 warn budget gets the 80 %
// warning on its brief and finishes. The blocked task's last phase is long,
// so that the checkpoint past its budget (after the second phase) comes
// before its plan could end, however loaded the machine.
func TestTaskBudgetBlocksAndWarns(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=1s cost=0.20"})
	tuning := &taskapi.Tuning{CheckpointEvery: 100 * time.Millisecond}
	blocked := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "bud-block", "Spend too much. [sim phase=docs delay=60s]"),
		Budget: &costs.Budget{LimitUSD: 0.3, Action: costs.Block}, Tuning: tuning})
	warned := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "bud-warn", "Spend a lot."),
		Budget: &costs.Budget{LimitUSD: 0.45, Action: costs.Warn}, Tuning: tuning})

	res := r.Result(blocked)
	require.Equal(t, mapping.TaskBlocked, res.Outcome.TaskStatus)
	require.Equal(t, "Budget exceeded ($0.40 spent of $0.30)", res.Outcome.LastError)
	require.Equal(t, "blocked", r.FileStatus("bud-block")["status"])

	res = r.Result(warned)
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus)
	var notes []string
	for _, e := range res.Brief.Log {
		if e.Action == "budget" {
			notes = append(notes, e.Detail)
		}
	}
	// The warning at $0.40; at $0.60 the warn budget notes the excess and
	// goes on, unless the plan's end came in the same checkpoint.
	require.NotEmpty(t, notes)
	require.Equal(t, "Budget warning: $0.40 spent of $0.45 (89%)", notes[0])
	if len(notes) > 1 {
		require.Equal(t, []string{"Budget exceeded ($0.60 spent of $0.45) (budget action warn: the task goes on)"}, notes[1:])
	}
	// The sink's brief has the note too, and the task's event stream a
	// budget message.
	require.Contains(t, string(r.FileBriefRaw("bud-warn")), "Budget warning: $0.40 spent of $0.45")
	stream, err := os.ReadFile(filepath.Join(r.WorkRoot, "events", "run-bud-warn.jsonl"))
	require.NoError(t, err)
	require.Contains(t, string(stream), `"source_type":"budget"`)
}

// A task budget with the action pause stops the task gracefully at 100 %
// and waits; `starter budget set` (the budget signal) raises it and the
// same plan completes as attempt 1, the phases that passed not run again.
func TestTaskBudgetPauseWaitsForBudgetSet(t *testing.T) {
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=1s cost=0.20"})
	run := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "bud-pause", "Spend, then wait."),
		Budget: &costs.Budget{LimitUSD: 0.3, Action: costs.Pause}, Tuning: &taskapi.Tuning{CheckpointEvery: 100 * time.Millisecond}})
	var st taskapi.Status
	require.Eventually(t, func() bool {
		s, err := r.Status("bud-pause")
		st = s
		return err == nil && s.Pause != nil
	}, 60*time.Second, 100*time.Millisecond, "the budget must pause the task")
	require.Equal(t, taskapi.PausedBudget, st.Pause.Reason)
	require.Contains(t, st.Pause.Budget, "Budget exceeded")
	require.Empty(t, r.LiveConductors(), "no conductor runs while the budget pauses the task")
	time.Sleep(2 * time.Second)
	st, err := r.Status("bud-pause")
	require.NoError(t, err)
	require.NotNil(t, st.Pause, "a budget pause has no end of its own")

	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	out, err := exec.Command(bin, "-address", r.Server.Addr, "budget", "set", "-budget", "5", "bud-pause").CombinedOutput()
	require.NoError(t, err, "%s", out)
	res := r.Result(run)
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus, res.Outcome.LastError)
	require.Equal(t, 1, res.Attempt)
	starts := phaseStarts(r, "bud-pause", res.PlanName)
	require.Equal(t, 1, starts["implement"], "phases: %v", starts)
	require.Equal(t, "completed", r.FileStatus("bud-pause")["status"])
	keepTaskHistory(t, r, "bud-pause", "PAUSE_WRITE_HISTORY", "pause-budget.json")
}

// A run with a $0.50 pause budget whose tasks cost $0.60 each: at 100 % the
// run pauses (status.json: paused, paused_reason budget), the two tasks
// running go on to their end, the third does not start; `starter run
// status` says it waits for a person, and `starter run budget set` raises
// the budget so that the run finishes.
func TestRunBudgetPauseWaitsForRunBudgetSet(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=1s cost=0.20"})
	runFile := `{"slug":"bp","title":"Budget pause","concurrency":2,"tasks":[
	 {"id":"bp-a","title":"A"},{"id":"bp-b","title":"B"},{"id":"bp-c","title":"C"}]}`
	statusPath := runact.RunStatusPath(r.WorkRoot, "bp")
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile),
		Budget: &costs.Budget{LimitUSD: 0.5, Action: costs.Pause},
		Tuning: &taskapi.Tuning{CheckpointEvery: 100 * time.Millisecond}})
	var seen runstatus.Status
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(statusPath)
		if err != nil {
			return false
		}
		var doc runstatus.Status
		if json.Unmarshal(data, &doc) != nil || doc.Tasks["bp-a"] == nil {
			return false
		}
		seen = doc
		return doc.Tasks["bp-a"].Status == runstatus.TaskDone && doc.Tasks["bp-b"].Status == runstatus.TaskDone
	}, 60*time.Second, 50*time.Millisecond, "the tasks running when the budget was spent go on to their end")
	require.Equal(t, runstatus.RunPaused, seen.Status, "status.json: the run is paused")
	require.Equal(t, runstatus.PausedBudget, seen.PausedReason)
	require.False(t, seen.PausedAt.IsZero())
	require.Equal(t, runstatus.TaskQueued, seen.Tasks["bp-c"].Status, "no task starts while the budget pauses the run")
	require.Empty(t, r.LiveConductors())

	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	out, err := exec.Command(bin, "-address", r.Server.Addr, "run", "status", "bp").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "waits for a person")
	require.Contains(t, string(out), "starter run budget set bp -budget N")

	out, err = exec.Command(bin, "-address", r.Server.Addr, "run", "budget", "set", "bp", "-budget", "5").CombinedOutput()
	require.NoError(t, err, "%s", out)
	doc := r.RunResult(wr, 2*time.Minute)
	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Equal(t, runstatus.TaskDone, doc.Tasks["bp-c"].Status)
	require.Empty(t, doc.PausedReason)
	res := r.Result(r.Client.GetWorkflow(t.Context(), runapi.TaskWorkflowID("bp-a"), ""))
	require.Equal(t, 3, res.Brief.CompletedPhases, "the budget's pause let the running task finish its plan")
	keepHistory(t, r, runapi.WorkflowID("bp"), "PAUSE_WRITE_HISTORY",
		filepath.Join("..", "workflows", "testdata", "histories", "run-budget-pause.json"), workflows.Register)
}
