package runflow

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
)

// fakeTasks stands in for the task workflows of a run: each task's attempts
// end as its script says, after a while of workflow time, and the fake
// records what the run asked of it.
type fakeTasks struct {
	mu sync.Mutex
	// fail: attempts of these tasks end blocked (all of them, or the first
	// n when failFirst has an entry).
	fail      map[string]bool
	failFirst map[string]int
	// took: how long an attempt runs (default 1m).
	took  map[string]time.Duration
	calls []taskapi.TaskInput
	// live / maxLive count attempts running at once.
	live, maxLive int
	order         []string // "start:<id>" and "end:<id>", in workflow time order
	aborted       []string // "<id>: <reason>" of each abort signal received
	notes         []string // "<id>: <detail>" of each note received
	// moved: the first attempt of these tasks was redispatched inside its
	// workflow this many times, so the workflow ends on a later attempt.
	moved map[string]int
	// lingers: these tasks tell their run they completed (as a task
	// workflow does before its final status write), then take this long
	// to close; "closed:<id>" goes in order when they do.
	lingers map[string]time.Duration
}

func (f *fakeTasks) child(ctx workflow.Context, in taskapi.TaskInput) (taskapi.Result, error) {
	id := in.Dispatch.TaskID
	f.mu.Lock()
	f.calls = append(f.calls, in)
	f.live++
	f.maxLive = max(f.maxLive, f.live)
	f.order = append(f.order, "start:"+id)
	n := 0
	for _, c := range f.calls {
		if c.Dispatch.TaskID == id {
			n++
		}
	}
	took := f.took[id]
	failing := f.fail[id] || n <= f.failFirst[id]
	f.mu.Unlock()
	if took == 0 {
		took = time.Minute
	}
	aborted := false
	if in.ReportSpend {
		// Half way, the attempt tells its run what it spent so far, as a
		// task does at its checkpoints.
		if err := workflow.Sleep(ctx, took/2); err != nil {
			return taskapi.Result{}, err
		}
		took -= took / 2
		parent := workflow.GetInfo(ctx).ParentWorkflowExecution
		_ = workflow.SignalExternalWorkflow(ctx, parent.ID, "", taskapi.SignalTaskSpend,
			taskapi.TaskSpend{Task: id, Attempt: in.Attempt, CostUSD: 0.2}).Get(ctx, nil)
	}
	notes := workflow.GetSignalChannel(ctx, taskapi.SignalNote)
	sel := workflow.NewSelector(ctx)
	done := false
	sel.AddFuture(workflow.NewTimer(ctx, took), func(workflow.Future) { done = true })
	sel.AddReceive(workflow.GetSignalChannel(ctx, taskapi.SignalAbort), func(c workflow.ReceiveChannel, _ bool) {
		var a taskapi.AbortSignal
		c.Receive(ctx, &a)
		aborted = true
		f.mu.Lock()
		f.aborted = append(f.aborted, id+": "+a.Reason)
		f.mu.Unlock()
	})
	sel.AddReceive(notes, func(c workflow.ReceiveChannel, _ bool) {})
	for !aborted && !done {
		sel.Select(ctx)
		var n taskapi.NoteSignal
		for notes.ReceiveAsync(&n) {
			f.mu.Lock()
			f.notes = append(f.notes, id+": "+n.Detail)
			f.mu.Unlock()
		}
	}
	f.mu.Lock()
	f.live--
	f.order = append(f.order, "end:"+id)
	f.mu.Unlock()
	cost := 0.25
	reached := in.Attempt
	if n == 1 {
		reached += f.moved[id]
	}
	res := taskapi.Result{TaskID: id, Attempt: reached, Dispatch: in.Dispatch,
		Attempts: []taskapi.AttemptSummary{{Attempt: in.Attempt, CostUSD: &cost}}}
	res.Brief.Plan.TotalPhases = 3
	res.Brief.CompletedPhases = 3
	res.Brief.Log = []mapping.LogEntry{{Action: "done", Detail: "all phases of " + id}}
	if aborted {
		res.Outcome = mapping.AbortedOutcome()
		return res, nil
	}
	if failing {
		res.Brief.CompletedPhases = 1
		res.Outcome = mapping.Outcome{TaskStatus: mapping.TaskBlocked, LastError: "check failed: go test"}
		return res, nil
	}
	res.Outcome = mapping.Outcome{TaskStatus: mapping.TaskCompleted}
	if linger := f.lingers[id]; linger > 0 {
		e := endOfResult(id, in.Attempt, res)
		parent := workflow.GetInfo(ctx).ParentWorkflowExecution
		_ = workflow.SignalExternalWorkflow(ctx, parent.ID, "", taskapi.SignalTaskEnded, taskapi.TaskEnded{
			Task: id, Attempt: in.Attempt, Reached: e.Reached, Summary: e.Summary, CostUSD: e.CostUSD,
			ByPhase: e.ByPhase, Model: e.Model, Skill: e.Skill}).Get(ctx, nil)
		if err := workflow.Sleep(ctx, linger); err != nil {
			return taskapi.Result{}, err
		}
		f.mu.Lock()
		f.order = append(f.order, "closed:"+id)
		f.mu.Unlock()
	}
	return res, nil
}

func (f *fakeTasks) attemptsOf(id string) []taskapi.TaskInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []taskapi.TaskInput
	for _, c := range f.calls {
		if c.Dispatch.TaskID == id {
			out = append(out, c)
		}
	}
	return out
}

const diamondRun = `{"title":"Diamond","slug":"diamond","concurrency":2,"tasks":[
 {"id":"a","title":"A","complexity":2},
 {"id":"b","title":"B","depends":["a"],"complexity":2},
 {"id":"c","title":"C","depends":["a"],"complexity":7},
 {"id":"d","title":"D","depends":["b","c"],"complexity":2},
 {"id":"e","title":"E","complexity":2}]}`

func runEnv(t *testing.T, f *fakeTasks) (*testsuite.TestWorkflowEnvironment, string) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: runapi.RunWorkflowName})
	env.RegisterWorkflowWithOptions(f.child, workflow.RegisterOptions{Name: taskapi.TaskWorkflowName})
	root := t.TempDir()
	env.RegisterActivity(&runact.Activities{Config: activities.Config{WorkRoot: root}})
	return env, root
}

// runStream reads a run's stream and replays it through the transition
// table: every event valid, no warning (no change the table does not
// list, no state_change that stays put). It returns each agent's
// state/type in order.
func runStream(t *testing.T, root, slug string) map[string][]string {
	t.Helper()
	stream, err := os.ReadFile(filepath.Join(root, "events", canonical.RunIDForRun(slug)+".jsonl"))
	require.NoError(t, err)
	var replay canonical.Stream
	byAgent := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(stream)), "\n") {
		ev, err := canonical.Parse([]byte(line))
		require.NoError(t, err)
		_, warns, err := replay.Validate(ev)
		require.NoError(t, err)
		require.Empty(t, warns, line)
		byAgent[ev.AgentID] = append(byAgent[ev.AgentID], string(ev.State)+"/"+string(ev.Type))
	}
	return byAgent
}

func runResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) runstatus.Status {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var doc runstatus.Status
	require.NoError(t, env.GetWorkflowResult(&doc))
	return doc
}

func TestRunDiamond(t *testing.T) {
	f := &fakeTasks{took: map[string]time.Duration{"e": 5 * time.Minute}}
	env, root := runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun)})
	doc := runResult(t, env)

	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Equal(t, &runstatus.Summary{TotalTasks: 5, Successful: 5, TotalLoops: 5, DurationMinutes: 5}, doc.Summary)
	require.LessOrEqual(t, f.maxLive, 2, "concurrency 2 exceeded")
	// d starts only once b and c ended, and not in a wave: as soon as both did.
	pos := func(s string) int { return slices.Index(f.order, s) }
	require.Greater(t, pos("start:d"), pos("end:b"))
	require.Greater(t, pos("start:d"), pos("end:c"))
	require.Greater(t, pos("start:b"), pos("end:a"))
	// Models: complexity below 5 on sonnet, c on opus, as env for the agent.
	require.Equal(t, "opus", *f.attemptsOf("c")[0].Dispatch.ModelHint)
	require.Equal(t, "sonnet", doc.Tasks["a"].Model)
	// d hears of b and c through its artifacts.
	d := f.attemptsOf("d")[0].Dispatch
	require.Len(t, d.Artifacts, 2)
	require.Equal(t, "b", d.Artifacts[0].ID)
	require.Equal(t, "done", d.Artifacts[0].Status)
	require.Contains(t, d.Artifacts[0].Summary, "3/3 phases completed")
	require.Equal(t, []string{"b", "c"}, d.UpstreamTaskIDs)

	// The run's stream: the run's states and each task's, every event valid.
	byAgent := runStream(t, root, "diamond")
	require.Equal(t, []string{"running/state_change", "done/task_done"}, byAgent["run"])
	require.Equal(t, []string{"idle/task_spawn", "running/state_change", "done/task_done"}, byAgent["task-d"])

	// status.json on disk is the document the workflow returned.
	data, err := os.ReadFile(filepath.Join(root, "prds", "diamond", "status.json"))
	require.NoError(t, err)
	var disk runstatus.Status
	require.NoError(t, json.Unmarshal(data, &disk))
	require.Equal(t, doc.Summary, disk.Summary)
	require.Equal(t, runstatus.RunComplete, disk.Status)
}

// A task that tells its run it completed before its workflow closes (its
// final status write still under way) has its dependents started at once;
// the run counts it once, and reports its own end only after it closed.
func TestRunStartsDependentsWhenATaskTellsItCompleted(t *testing.T) {
	f := &fakeTasks{lingers: map[string]time.Duration{"a": 30 * time.Second, "d": 3 * time.Minute}}
	env, _ := runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun)})
	doc := runResult(t, env)

	require.Equal(t, runstatus.RunComplete, doc.Status)
	pos := func(s string) int { return slices.Index(f.order, s) }
	require.Less(t, pos("start:b"), pos("closed:a"), "b waited for a's workflow to close: %v", f.order)
	require.Less(t, pos("start:c"), pos("closed:a"), "c waited for a's workflow to close: %v", f.order)
	require.Equal(t, f.order[len(f.order)-1], "closed:d", "the run ended before d's workflow closed: %v", f.order)
	require.Len(t, f.attemptsOf("a"), 1)
	// d completed at 3m and closed at 6m: the run ended when it closed.
	require.Equal(t, &runstatus.Summary{TotalTasks: 5, Successful: 5, TotalLoops: 5, DurationMinutes: 6}, doc.Summary)
	var cost runapi.Cost
	v, err := env.QueryWorkflow(runapi.QueryCost)
	require.NoError(t, err)
	require.NoError(t, v.Get(&cost))
	require.InDelta(t, 5*0.25, cost.SpentUSD, 1e-9, "a task told early is counted once")
}

func TestRunFailureCascadeWithLoopsAndUpgrade(t *testing.T) {
	f := &fakeTasks{fail: map[string]bool{"a": true}}
	env, root := runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun)})
	doc := runResult(t, env)

	// The stream keeps to the table: a's failures are errors (a retry
	// may follow, even once the run is reopened); d, blocked by a before
	// it ever ran, stays idle.
	byAgent := runStream(t, root, "diamond")
	require.Equal(t, "error/error", byAgent["task-a"][len(byAgent["task-a"])-1], "%v", byAgent["task-a"])
	require.Equal(t, []string{"idle/task_spawn", "idle/task_update"}, byAgent["task-d"])

	require.Equal(t, runstatus.RunPartial, doc.Status)
	a := doc.Tasks["a"]
	require.Equal(t, runstatus.TaskFailed, a.Status)
	require.Equal(t, "opus", a.Model)
	require.Equal(t, 1, a.ModelUpgrades)
	require.Equal(t, 2, a.LoopCount, "loops on opus after the upgrade reset the count")
	require.Contains(t, a.Error, "check failed: go test")
	// Five attempts in all: three on sonnet, two on opus, each a new plan.
	atts := f.attemptsOf("a")
	require.Len(t, atts, 5)
	for i, in := range atts {
		want := "sonnet"
		if i >= 3 {
			want = "opus"
		}
		require.Equal(t, want, *in.Dispatch.ModelHint, "attempt %d", i+1)
		require.Equal(t, i+1, in.Attempt)
	}
	for _, id := range []string{"b", "c", "d"} {
		require.Equal(t, runstatus.TaskBlocked, doc.Tasks[id].Status, id)
		require.Equal(t, []string{"a"}, doc.Tasks[id].BlockedBy, id)
		require.Empty(t, f.attemptsOf(id), "%s must not start", id)
	}
	require.Equal(t, runstatus.TaskDone, doc.Tasks["e"].Status, "independent tasks go on")
	require.Equal(t, 1, doc.Summary.ModelUpgrades)
	require.Equal(t, 1, doc.Summary.Failed)
}

// update sends an update at a point of workflow time and records its answer.
func update(env *testsuite.TestWorkflowEnvironment, at time.Duration, name string, answers *[]string, args ...any) {
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(name, fmt.Sprintf("%s-%d", name, at), &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { *answers = append(*answers, name+": rejected: "+err.Error()) },
			OnAccept:   func() {},
			OnComplete: func(_ any, err error) { *answers = append(*answers, fmt.Sprintf("%s: %v", name, err)) },
		}, args...)
	}, at)
}

func TestRunPauseResumeSkipRetry(t *testing.T) {
	// a fails twice (two loops) then passes; e runs long so the run stays
	// open while a person acts.
	f := &fakeTasks{failFirst: map[string]int{"a": 5}, took: map[string]time.Duration{"e": 30 * time.Minute}}
	env, root := runEnv(t, f)
	var answers []string
	update(env, 30*time.Second, runapi.UpdatePause, &answers)
	update(env, 31*time.Second, runapi.UpdatePause, &answers)
	update(env, 32*time.Second, runapi.UpdateSkip, &answers, runapi.TaskRequest{Task: "a"})
	update(env, 33*time.Second, runapi.UpdateRetry, &answers, runapi.TaskRequest{Task: "nope"})
	update(env, 3*time.Minute, runapi.UpdateResume, &answers)
	// By 12m, a has failed for good (5 loops), b, c and d are blocked.
	var mid runstatus.Status
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(runapi.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&mid))
	}, 12*time.Minute)
	update(env, 13*time.Minute, runapi.UpdateRetry, &answers, runapi.TaskRequest{Task: "a"})
	update(env, 13*time.Minute+time.Second, runapi.UpdateSkip, &answers, runapi.TaskRequest{Task: "c"})
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun)})
	doc := runResult(t, env)
	// a failed for good, then retried, then done; b and d blocked before
	// they ran, then released; c skipped before it ran: all in the table.
	byAgent := runStream(t, root, "diamond")
	require.Equal(t, "done/task_done", byAgent["task-a"][len(byAgent["task-a"])-1], "%v", byAgent["task-a"])
	require.Equal(t, "cancelled/task_done", byAgent["task-c"][len(byAgent["task-c"])-1], "%v", byAgent["task-c"])

	require.Equal(t, []string{
		"pause: <nil>",
		"pause: rejected: run diamond: cannot pause: it is paused: invalid transition",
		"skip: rejected: task a: cannot skip: it is running: invalid transition",
		"retry: rejected: task nope: unknown task",
		"resume: <nil>",
		"retry: <nil>",
		"skip: <nil>",
	}, answers)
	// While paused, nothing new started: e and a had started before the pause
	// (concurrency 2); a's loops went on, b waited.
	require.Equal(t, runstatus.TaskFailed, mid.Tasks["a"].Status)
	require.Equal(t, runstatus.TaskBlocked, mid.Tasks["d"].Status)
	// After the retry a passed (its sixth attempt), c was skipped, so b and d ran.
	require.Equal(t, runstatus.RunComplete, doc.Status, "skipped tasks count as done")
	require.Equal(t, runstatus.TaskDone, doc.Tasks["a"].Status)
	require.Equal(t, runstatus.TaskSkipped, doc.Tasks["c"].Status)
	require.Equal(t, runstatus.TaskDone, doc.Tasks["d"].Status)
	require.Len(t, f.attemptsOf("a"), 6)
	require.Empty(t, f.attemptsOf("c"))
	require.Equal(t, &runstatus.Summary{TotalTasks: 5, Successful: 4, Skipped: 1, TotalLoops: 4, // a counts its one loop since the retry

		ModelUpgrades: 1, DurationMinutes: doc.Summary.DurationMinutes}, doc.Summary)
}

func TestRunAbort(t *testing.T) {
	f := &fakeTasks{took: map[string]time.Duration{"a": time.Hour, "e": time.Hour}}
	env, _ := runEnv(t, f)
	var answers []string
	update(env, time.Minute, runapi.UpdateAbort, &answers, runapi.AbortRequest{Reason: "wrong branch"})
	update(env, 2*time.Minute, runapi.UpdatePause, &answers)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun)})
	doc := runResult(t, env)
	require.Equal(t, []string{"abort: <nil>"}, answers[:1])
	require.Equal(t, runstatus.RunPartial, doc.Status)
	require.ElementsMatch(t, []string{"a: wrong branch", "e: wrong branch"}, f.aborted)
	require.Equal(t, runstatus.TaskFailed, doc.Tasks["a"].Status)
	require.Equal(t, "run aborted", doc.Tasks["a"].Error)
	require.Equal(t, runstatus.TaskBlocked, doc.Tasks["b"].Status)
}

func TestRunRejectsBadRunFile(t *testing.T) {
	f := &fakeTasks{}
	env, _ := runEnv(t, f)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(`{"title":"x","tasks":[{"id":"a","title":"A","depends":["a"]}]}`)})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "invalid run file") && strings.Contains(err.Error(), "task a"), err.Error())
}

func TestRunBudgetBlocks(t *testing.T) {
	f := &fakeTasks{}
	env, _ := runEnv(t, f)
	budget := costs.Budget{LimitUSD: 0.4, Action: costs.Block}
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun), Budget: &budget})
	doc := runResult(t, env)
	// a and e run at once and report $0.20 each half way: the budget is
	// spent, both are aborted with the budget's words, nothing else starts.
	const msg = "Budget exceeded ($0.40 spent of $0.40)"
	require.ElementsMatch(t, []string{"a: " + msg, "e: " + msg}, f.aborted)
	require.Equal(t, runstatus.RunPartial, doc.Status)
	require.Equal(t, msg, doc.Tasks["a"].Error)
	require.Equal(t, msg, doc.Tasks["e"].Error)
	require.Equal(t, runstatus.TaskBlocked, doc.Tasks["b"].Status)
	require.Len(t, f.calls, 2)
}

func TestRunBudgetWarns(t *testing.T) {
	f := &fakeTasks{took: map[string]time.Duration{"e": 10 * time.Minute}}
	env, _ := runEnv(t, f)
	budget := costs.Budget{LimitUSD: 1, Action: costs.Warn}
	var c runapi.Cost
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(runapi.QueryCost)
		require.NoError(t, err)
		require.NoError(t, v.Get(&c))
	}, 6*time.Minute)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun), Budget: &budget})
	doc := runResult(t, env)
	require.Equal(t, runstatus.RunComplete, doc.Status, "a warn budget lets the run finish")
	// Each note reached the tasks running when it was given, once.
	require.Equal(t, []string{
		"d: Budget warning: $0.95 spent of $1.00 (95%)",
		"e: Budget warning: $0.95 spent of $1.00 (95%)",
		"e: Budget exceeded ($1.00 spent of $1.00) (budget action warn: the run goes on)",
	}, f.notes)
	// The cost query mid-run: ended attempts by model add up to the total,
	// the running ones' reports come on top, the level follows.
	require.InDelta(t, c.Summary.TotalUSD+c.RunningUSD, c.SpentUSD, 1e-9)
	require.InDelta(t, c.Summary.TotalUSD, c.Summary.ByModel["sonnet"]+c.Summary.ByModel["opus"], 1e-9)
	require.NotZero(t, c.Summary.ByModel["opus"], "c runs on opus: %+v", c)
	require.NotZero(t, c.RunningUSD, "e reported half way")
	require.Equal(t, budget.Level(c.SpentUSD).String(), c.Level)
}
