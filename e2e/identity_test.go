//go:build realserver

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"karvi-edda-temporal/api/intent"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/intent"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/testrig"
)

// An attempt is unique for the life of its task: every new workflow of a
// task (a schedule's next fire, a second run naming it, a run's next loop,
// a start after the last workflow ended) starts a conductor of its own.
// One run directory per conductor start is what these tests count.

// conductorRuns counts a task's conductor starts (run directories, each
// with a plan_start in its log).
func conductorRuns(t *testing.T, r *testrig.Rig, taskID string) int {
	t.Helper()
	plans := r.Plans(taskID)
	for _, p := range plans {
		starts := 0
		for _, ev := range r.Events(taskID, p) {
			if ev["type"] == "plan_start" {
				starts++
			}
		}
		require.Equal(t, 1, starts, "plan %s: one conductor run wrote its log", p)
	}
	return len(plans)
}

// (a) A schedule intent with a run target: each fire runs the conductor.
func TestScheduleRunTargetRunsTheConductorEveryFire(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass"})
	in := newIntents(t, r)
	r.Track(runapi.WorkflowID("idsched"))
	r.Track(runapi.TaskWorkflowID("ids-a"))
	file := in.file("idsched.json", []byte(`{"slug":"idsched","title":"Sched","tasks":[{"id":"ids-a","title":"A"}]}`))
	in.starter("schedule", "create", "-name", "ids1", "-cron", "*/5 * * * * * *", "-tz", "UTC",
		"-min-interval", "1s", "-max-runs", "2", file)
	v := in.wait("ids1", "converged after 2 runs", func(v intentapi.View) bool { return v.Status == intent.StatusConverged })
	require.Equal(t, 2, v.State.Runs)
	require.Equal(t, 2, conductorRuns(t, r, "ids-a"), "two fires, two conductor runs (not one replayed)")
}

// (b) A run's next loop after its task was redispatched inside its
// workflow starts a new conductor rather than re-attaching to the
// redispatched attempt's.
func TestRunLoopAfterARedispatchStartsANewConductor(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=100ms"})
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(`{"slug":"idloop","title":"Loop","tasks":[
	 {"id":"idl-a","title":"A","description":"[sim phase=test fail]"}]}`)})
	r.WaitPhase("idl-a", "implement")
	require.NoError(t, r.Signal("idl-a", taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: "test"}))
	doc := r.RunResult(wr, 5*time.Minute)
	a := doc.Tasks["idl-a"]
	require.Equal(t, runstatus.TaskFailed, a.Status)
	// Every attempt ran a conductor of its own: the redispatched first
	// task workflow made two, each later one (a loop) one.
	children := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := r.Client.GetWorkflowHistory(ctx, runapi.WorkflowID("idloop"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType() == enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED {
			children++
		}
	}
	require.Greater(t, children, 1, "the run looped")
	require.Equal(t, children+1, conductorRuns(t, r, "idl-a"), "one conductor per attempt, none replayed")
}

// (c) A second run naming a task that already ran starts a new attempt:
// its conductor runs, with a plan name of its own.
func TestASecondRunNamingATaskStartsANewAttempt(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass"})
	for i, slug := range []string{"idrun1", "idrun2"} {
		wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(`{"slug":"` + slug + `","title":"Again","tasks":[{"id":"idr-a","title":"A"}]}`)})
		doc := r.RunResult(wr, 3*time.Minute)
		require.Equal(t, runstatus.TaskDone, doc.Tasks["idr-a"].Status, slug)
		require.Equal(t, i+1, conductorRuns(t, r, "idr-a"), "after run %s", slug)
	}
}

// (c) A start of a task whose workflow ended says so and starts a new
// attempt, numbered after the last, with its own conductor.
func TestStarterStartAfterTheTaskEndedStartsANewAttempt(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass"})
	in := newIntents(t, r)
	file := in.dispatch("IDS-T", "Tidy.")
	out := in.starter("start", file)
	require.Contains(t, out, "(attempt 1, plan karvi-ids-t-")
	first := r.Result(r.Client.GetWorkflow(context.Background(), taskapi.WorkflowID("IDS-T"), ""))
	require.Equal(t, mapping.TaskCompleted, first.Outcome.TaskStatus)

	out = in.starter("start", file)
	require.Contains(t, out, "task IDS-T ran before (workflow karvi-task-IDS-T run ")
	require.Contains(t, out, "ended completed on attempt 1): starting a new attempt")
	require.Contains(t, out, "(attempt 2, plan ")
	second := r.Result(r.Client.GetWorkflow(context.Background(), taskapi.WorkflowID("IDS-T"), ""))
	require.Equal(t, mapping.TaskCompleted, second.Outcome.TaskStatus)
	require.Equal(t, 2, second.Attempt)
	require.True(t, strings.Contains(out, "plan "+second.PlanName+")"), "the output names the new attempt's plan:\n%s", out)
	require.Equal(t, 2, conductorRuns(t, r, "IDS-T"))
}

// (d) Two workflows of one task against one slot pool: the second is
// answered for its own attempt (not the first's cached grant or settled
// release), and the pool never holds more than max_concurrent.
func TestTwoWorkflowsOfATaskGetFreshSlots(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=100ms"})
	pool := r.PoolName("ident")
	r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 1})
	for i := 1; i <= 2; i++ {
		run := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "sl-id-a", "Again."),
			Slots: &taskapi.SlotRequest{Pool: pool}})
		// Meanwhile another task waits in line: the one slot is the first
		// workflow's, then the second's, never both.
		other := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "sl-id-b"+string(rune('0'+i)), "Waits."),
			Slots: &taskapi.SlotRequest{Pool: pool}})
		res := r.Result(run)
		require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus, "workflow %d: %s", i, res.Outcome.LastError)
		require.Equal(t, mapping.TaskCompleted, r.Result(other).Outcome.TaskStatus)
		v := r.WaitPool(pool, "every slot released", func(v slotapi.View) bool { return len(v.Holders) == 0 && len(v.Waiters) == 0 })
		require.Equal(t, 2*i, v.Stats.Granted, "each attempt was granted a slot the pool counted")
	}
	require.Equal(t, 2, conductorRuns(t, r, "sl-id-a"))
}
