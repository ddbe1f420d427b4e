//go:build realserver

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// slotRun is a run file of n independent tasks ids prefix-00.. with room
// for every one of them at once: only the pool holds them back.
func slotRun(slug, prefix string, n int) json.RawMessage {
	var tasks []string
	for i := range n {
		tasks = append(tasks, fmt.Sprintf(`{"id":"%s-%02d","title":"Task %d"}`, prefix, i, i))
	}
	return json.RawMessage(fmt.Sprintf(`{"slug":%q,"title":%q,"concurrency":%d,"tasks":[%s]}`, slug, slug, n, strings.Join(tasks, ",")))
}

// 20 tasks from 3 runs, each run free to start all its tasks at once,
// against one pool of 4: the process table, sampled every 20 ms, never
// shows more than 4 conductors; every task completes; a task waiting in
// line says so in its status and its Web UI details; and the pool ends
// with nobody holding or waiting.
func TestSlotPoolCapsConductorsAcrossRuns(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=150ms cost=0.01"})
	pool := r.PoolName("cap")
	r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 4})

	live := r.SampleConductors()
	runs := map[string]client.WorkflowRun{}
	for i, n := range []int{7, 7, 6} {
		slug := fmt.Sprintf("slots-cap-%d", i)
		runs[slug], _ = r.StartRun(runapi.RunInput{Run: slotRun(slug, fmt.Sprintf("sc%d", i), n), Pool: pool})
	}

	// Catch one task in line and read what it says of itself.
	wait.EventuallyEvery(t, time.Minute, time.Millisecond, "a task seen waiting in line", func() (any, bool) {
		waiters := r.Pool(pool).Waiters
		for _, w := range waiters {
			s, err := r.Status(w.Task)
			if err != nil || s.Slot == nil || s.Slot.State != "waiting" || s.Slot.Position == 0 {
				continue // granted meanwhile, or its request still on its way
			}
			require.Equal(t, pool, s.Slot.Pool)
			require.Equal(t, taskapi.StagePrepare, s.Stage)
			details := r.CurrentDetails(w.Task)
			if strings.Contains(details, "Waiting for a slot (position ") {
				require.Contains(t, details, " in pool "+pool+")")
				return nil, true
			}
		}
		return waiters, false
	})

	for slug, run := range runs {
		doc := r.RunResult(run, 5*time.Minute)
		require.Equal(t, runstatus.RunComplete, doc.Status, "run %s", slug)
		for id, task := range doc.Tasks {
			require.Equal(t, 1, task.LoopCount, "task %s needed more than one attempt", id)
		}
	}
	live.Stop(t)
	require.LessOrEqual(t, live.Most(), 4, "more conductors at once than the pool allows")
	v := r.WaitPool(pool, "every slot released", func(v slotapi.View) bool { return len(v.Holders) == 0 })
	require.Empty(t, v.Waiters)
	require.Equal(t, 20, v.Stats.Granted)
	require.Equal(t, 20, v.Stats.Released)
	require.Zero(t, v.Dropped, "every task gave its slot back itself")
	r.AssertNoOrphans()
}

// startSlotTasks starts one single task per id, each waiting for pool.
func startSlotTasks(r *testrig.Rig, pool, message string, ids ...string) {
	for _, id := range ids {
		r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(r.T(), id, message),
			Slots: &taskapi.SlotRequest{Pool: pool}})
	}
}

func holders(v slotapi.View) []string {
	var out []string
	for _, h := range v.Holders {
		out = append(out, h.Task)
	}
	return out
}

// max_concurrent changed while tasks hold and wait: raising it grants the
// waiters at once; lowering it takes no slot back and grants nothing until
// the holders are under the new limit. The tasks hang until aborted, so
// the test decides when a slot comes free.
func TestSlotLimitChangesTakeEffectAtOnce(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=100ms"})
	pool := r.PoolName("limits")
	r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 1})
	ids := []string{"sl-lim-a", "sl-lim-b", "sl-lim-c", "sl-lim-d"}

	before := r.SampleConductors()
	startSlotTasks(r, pool, "Hangs. [sim phase=implement hang=forever]", ids...)
	v := r.WaitPool(pool, "one holder and three in line", func(v slotapi.View) bool { return len(v.Holders) == 1 && len(v.Waiters) == 3 })
	before.Stop(t)
	require.LessOrEqual(t, before.Most(), 1, "one conductor at a time before the limit was raised")
	// The line's order is the order the requests reached the pool.
	line := append(holders(v), waiters(v)...)

	during := r.SampleConductors()
	v = r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 3})
	require.Equal(t, line[:3], holders(v), "raising the limit granted the first two in line at once")
	require.Equal(t, line[3:], waiters(v))
	wait.EventuallyEvery(t, time.Minute, 20*time.Millisecond, "the two granted tasks to start their conductors", func() (any, bool) {
		live := r.LiveConductors()
		return fmt.Sprintf("%d live conductors", len(live)), len(live) >= 3
	})

	v = r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 1})
	require.Equal(t, line[:3], holders(v), "lowering the limit takes no slot back")
	for i, id := range line[:3] {
		require.NoError(t, r.Signal(id, taskapi.SignalAbort, taskapi.AbortSignal{Reason: "free a slot"}))
		v = r.WaitPool(pool, id+" released", func(v slotapi.View) bool { return !slices.Contains(holders(v), id) })
		if i < 2 {
			require.Equal(t, line[3:], waiters(v), "nothing granted while the holders are at or over the new limit")
		}
	}
	v = r.WaitPool(pool, "the last task granted", func(v slotapi.View) bool { return len(v.Holders) > 0 })
	require.Equal(t, line[3:], holders(v))
	require.Empty(t, v.Waiters)
	require.NoError(t, r.Signal(line[3], taskapi.SignalAbort, taskapi.AbortSignal{Reason: "test over"}))
	for _, id := range ids {
		res := r.Result(r.Client.GetWorkflow(context.Background(), taskapi.WorkflowID(id), ""))
		require.Equal(t, mapping.MsgUserAbort, res.Outcome.LastError, id)
	}
	during.Stop(t)
	require.LessOrEqual(t, during.Most(), 3)
	v = r.WaitPool(pool, "every slot released", func(v slotapi.View) bool { return len(v.Holders) == 0 })
	require.Equal(t, 4, v.Stats.Granted)
	r.AssertNoOrphans()
}

func waiters(v slotapi.View) []string {
	var out []string
	for _, w := range v.Waiters {
		out = append(out, w.Task)
	}
	return out
}

// A task whose workflow is terminated while it holds a slot cannot give it
// back: the pool's next check of its holders frees it, and the task in line
// gets it and runs to its end.
func TestSlotOfATerminatedTaskGoesToTheNextInLine(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=100ms"})
	pool := r.PoolName("term")
	r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 1, CheckEvery: time.Second})
	startSlotTasks(r, pool, "Hangs. [sim phase=implement hang=forever]", "sl-term-a")
	r.WaitPool(pool, "a holds the slot", func(v slotapi.View) bool { return len(v.Holders) == 1 })
	startSlotTasks(r, pool, "Waits.", "sl-term-b")
	r.WaitFor("sl-term-b", "b waiting in line", func(s taskapi.Status) bool { return s.Slot != nil && s.Slot.State == "waiting" })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.Client.TerminateWorkflow(ctx, taskapi.WorkflowID("sl-term-a"), "", "test: a task dies holding its slot"))

	res := r.Result(r.Client.GetWorkflow(context.Background(), taskapi.WorkflowID("sl-term-b"), ""))
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus)
	v := r.WaitPool(pool, "every slot released", func(v slotapi.View) bool { return len(v.Holders) == 0 })
	require.Empty(t, v.Waiters)
	require.Equal(t, 1, v.Dropped, "a's slot was taken back from its closed workflow")
	require.Equal(t, 2, v.Stats.Granted)
}

// A task that may not wait in line long enough ends blocked, saying which
// pool and why; it never starts a conductor.
func TestSlotTimeoutEndsTheTaskBlocked(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=100ms"})
	pool := r.PoolName("timeout")
	r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 1})
	startSlotTasks(r, pool, "Hangs. [sim phase=implement hang=forever]", "sl-to-a")
	r.WaitPool(pool, "a holds the slot", func(v slotapi.View) bool { return len(v.Holders) == 1 })
	run := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "sl-to-b", "Waits briefly."),
		Slots: &taskapi.SlotRequest{Pool: pool, Timeout: 2 * time.Second}})
	res := r.Result(run)
	require.Equal(t, mapping.TaskBlocked, res.Outcome.TaskStatus)
	require.Equal(t, "no agent slot in pool "+pool+" within 2s: timeout", res.Outcome.LastError)
	require.Equal(t, "no agent slot in pool "+pool+" within 2s: timeout", r.FileStatus("sl-to-b")["blocker"].(map[string]any)["reason"])
	_, err := os.Stat(filepath.Join(r.WorkRoot, "runs", "sl-to-b"))
	require.True(t, os.IsNotExist(err), "no plan, no conductor for a task that got no slot")
	v := r.Pool(pool)
	require.Equal(t, []string{"sl-to-a"}, holders(v))
	require.Empty(t, v.Waiters)
	require.Equal(t, 1, v.Stats.Refused["timeout"])
	require.NoError(t, r.Signal("sl-to-a", taskapi.SignalAbort, taskapi.AbortSignal{Reason: "test over"}))
	r.WaitPool(pool, "a's slot released", func(v slotapi.View) bool { return len(v.Holders) == 0 })
}

// A pool serves its line by turns across runs: a run of one task that
// starts while a run of six fills the pool's one slot and its line gets
// the next slot freed, not the one after the big run's last task.
func TestSlotPoolServesASmallRunBehindABigOne(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=300ms cost=0.01"})
	pool := r.PoolName("fair")
	r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 1})
	// `starter slots` with no pool lists the pools that run; a pool whose
	// worker is gone (its task queue has no poller) does not hide the rest.
	deaf := r.PoolName("deaf")
	r.Track(slotapi.WorkflowID(deaf))
	_, err := r.Client.ExecuteWorkflow(context.Background(), slotapi.StartOptions(deaf, r.Queue+"-nobody-polls"),
		slotapi.PoolWorkflowName, slotapi.PoolInput{Pool: deaf})
	require.NoError(t, err)
	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	out, err := exec.Command(bin, "slots", "-address", r.Server.Addr, "-namespace", r.Server.Namespace).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "pool "+pool+": max_concurrent 1, ")
	require.Contains(t, string(out), "pool "+deaf+": no answer: is a worker polling task queue ")
	require.Contains(t, string(out), "task queue "+r.Queue+"-nobody-polls")

	// The big run's first task holds the slot for 8 s, so the small run's
	// task joins the line before the first release even on a busy machine.
	bigRun := strings.Replace(string(slotRun("slots-fair-big", "fb", 6)), `"title":"Task 0"`,
		`"title":"Task 0","description":"[sim phase=implement delay=8s]"`, 1)
	big, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(bigRun), Pool: pool})
	r.WaitPool(pool, "the big run holding the slot with five in line", func(v slotapi.View) bool {
		return len(v.Holders) == 1 && len(v.Waiters) == 5
	})
	// The small run's task holds its slot for 5 s, so the wait below sees
	// it holding even on a busy machine (at 300 ms a phase it came and went
	// between two of the wait's queries).
	smallRun := strings.Replace(string(slotRun("slots-fair-small", "fs", 1)), `"title":"Task 0"`,
		`"title":"Task 0","description":"[sim phase=implement delay=5s]"`, 1)
	small, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(smallRun), Pool: pool})
	v := r.WaitPool(pool, "the small run's task in line", func(v slotapi.View) bool {
		return slices.ContainsFunc(v.Waiters, func(w slotapi.WaiterView) bool { return w.Task == "fs-00" }) ||
			slices.Contains(holders(v), "fs-00")
	})
	// Granted when the small run's task joined the line: it must get the
	// next slot freed. Seen already holding, it came before the first
	// release, so its grant is the second.
	grantedAtJoin := 1
	if !slices.Contains(holders(v), "fs-00") {
		if v.Waiters[0].Task != "fs-00" {
			t.Fatalf("the small run's task is not next in line: %+v", v.Waiters)
		}
		grantedAtJoin = v.Stats.Granted
	}
	v = r.WaitPool(pool, "the small run's task holding the slot", func(v slotapi.View) bool {
		return slices.Contains(holders(v), "fs-00")
	})
	require.Equal(t, grantedAtJoin+1, v.Stats.Granted, "the small run's task got the first slot freed after it joined the line")

	for _, run := range []client.WorkflowRun{big, small} {
		require.Equal(t, runstatus.RunComplete, r.RunResult(run, 3*time.Minute).Status)
	}
	r.AssertNoOrphans()
}
