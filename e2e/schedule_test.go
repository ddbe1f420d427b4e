//go:build realserver

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"karvi-edda-temporal/api/intent"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/intent"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// intents drives schedule intents on a rig: through the starter, as a
// person would, and reads them back through the client.
type intents struct {
	t *testing.T
	r *testrig.Rig
	x *intentapi.Intents
}

func newIntents(t *testing.T, r *testrig.Rig) *intents {
	in := &intents{t: t, r: r, x: &intentapi.Intents{Client: r.Client, TaskQueue: r.Queue, Quota: intent.DefaultQuota}}
	// Before the rig's cleanup (which stops the worker and terminates what
	// it tracked): no schedule may go on firing into later tests.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		views, _ := in.x.List(ctx)
		for _, v := range views {
			if v.TaskQueue == r.Queue {
				_ = in.x.Cancel(ctx, v.Name, "test over")
			}
		}
	})
	return in
}

// starter runs bin/starter against the rig's server and queue; it fails
// the test if the command fails.
func (in *intents) starter(args ...string) string {
	in.t.Helper()
	out, err := in.starterErr(args...)
	require.NoError(in.t, err, "starter %v:\n%s", args, out)
	return out
}

func (in *intents) starterErr(args ...string) (string, error) {
	bin, err := devenv.Binary("starter")
	require.NoError(in.t, err)
	cmd := exec.Command(bin, append(args, "-address", in.r.Server.Addr, "-task-queue", in.r.Queue)...)
	cmd.Env = append(os.Environ(), "TEMPORAL_CONFIG_FILE="+filepath.Join(in.r.Dir, "no-profile.toml"), "USER=e2e")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// file writes a target file in the test's directory.
func (in *intents) file(name string, data []byte) string {
	in.t.Helper()
	p := filepath.Join(in.r.Dir, name)
	require.NoError(in.t, os.WriteFile(p, data, 0o644))
	return p
}

// dispatch writes task id's DispatchPlan and has cleanup close its workflow.
func (in *intents) dispatch(id, message string) string {
	in.r.Track(taskapi.WorkflowID(id))
	return in.file(id+".json", testrig.MustJSON(in.t, testrig.Dispatch(in.t, id, message)))
}

// wait polls the intent until cond holds; the deadline only keeps a hung
// test from hanging the suite.
func (in *intents) wait(name, what string, cond func(intentapi.View) bool) intentapi.View {
	in.t.Helper()
	var last intentapi.View
	wait.EventuallyEvery(in.t, 3*time.Minute, 200*time.Millisecond, "intent "+name+": "+what, func() (any, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		v, err := in.x.Get(ctx, name)
		cancel()
		if err != nil {
			return fmt.Errorf("view %s; error %w", testrig.MustJSON(in.t, last), err), false
		}
		last = v
		return v, cond(v)
	})
	return last
}

// targetRun is one run of a target's workflow, as visibility lists it.
type targetRun struct {
	runID         string
	start         time.Time
	status        enumspb.WorkflowExecutionStatus
	intent, fire  string
	firedFor      time.Time // the fire's time, from its workflow id
	attempt       int
	outcomeStatus string
}

// targetRuns lists every run of workflow id, oldest first, with the marks
// the intent left on it and, for a task that ended with a result, its
// attempt and status. The list is read from the server's visibility, not
// from the intent's own records.
func (in *intents) targetRuns(workflowID string) []targetRun {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := in.r.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", workflowID)})
	require.NoError(in.t, err)
	dc := converter.GetDefaultDataConverter()
	var runs []targetRun
	for _, e := range resp.Executions {
		run := targetRun{runID: e.Execution.RunId, start: e.StartTime.AsTime(), status: e.Status}
		if p := e.GetMemo().GetFields()[intentapi.MemoIntent]; p != nil {
			require.NoError(in.t, dc.FromPayload(p, &run.intent))
		}
		if p := e.GetMemo().GetFields()[intentapi.MemoFire]; p != nil {
			require.NoError(in.t, dc.FromPayload(p, &run.fire))
			run.firedFor = fireTimeOf(in.t, run.fire)
		}
		if e.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED && strings.HasPrefix(workflowID, "karvi-task-") {
			var res taskapi.Result
			require.NoError(in.t, in.r.Client.GetWorkflow(ctx, workflowID, run.runID).Get(ctx, &res))
			run.attempt, run.outcomeStatus = res.Attempt, string(res.Outcome.TaskStatus)
		}
		runs = append(runs, run)
	}
	slices.SortFunc(runs, func(a, b targetRun) int { return a.start.Compare(b.start) })
	return runs
}

// fireTimeOf reads a fire's time from its workflow id: the schedule names
// each fire <schedule id>-<time, RFC 3339>.
func fireTimeOf(t *testing.T, fireID string) time.Time {
	t.Helper()
	require.Greater(t, len(fireID), len(time.RFC3339))
	at, err := time.Parse(time.RFC3339, fireID[len(fireID)-len("2006-01-02T15:04:05Z"):])
	require.NoError(t, err, "fire id %s", fireID)
	return at
}

// timers are the durations of the timers a workflow started, in order.
func (in *intents) timers(workflowID string) []time.Duration {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := in.r.Client.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var ds []time.Duration
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(in.t, err)
		if a := ev.GetTimerStartedEventAttributes(); a != nil {
			ds = append(ds, a.StartToFireTimeout.AsDuration())
		}
	}
	return ds
}

func specTimes(t *testing.T, v intentapi.View) intent.Times {
	t.Helper()
	times, err := v.Spec.Times()
	require.NoError(t, err)
	return times
}

// A cron firing every five seconds starts a new attempt of its task on
// each fire it runs, on time, until max_runs: then the schedule is paused
// as converged and nothing more starts. Each task run is checked against
// the spec through its fire's time, not by counting sleeps.
func TestScheduleCronFiresOnTimeUntilMaxRuns(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass"})
	in := newIntents(t, r)
	file := in.dispatch("SC1", "Tidy the changelog.")
	out := in.starter("schedule", "create", "-name", "sc1", "-cron", "*/5 * * * * * *", "-tz", "UTC",
		"-min-interval", "1s", "-max-runs", "3", file)
	require.Contains(t, out, "created intent sc1 (schedule karvi-intent-sc1)")
	require.Contains(t, out, "fires    task SC1 (Tidy the changelog.), cron */5 * * * * * * in UTC")

	v := in.wait("sc1", "converged after 3 runs", func(v intentapi.View) bool { return v.Status == intent.StatusConverged })
	require.Equal(t, 3, v.State.Runs)
	require.True(t, strings.HasPrefix(v.Note, "converged: max_runs 3 reached (task SC1 completed)"), v.Note)
	require.Equal(t, intent.StatusConverged, v.State.Status)

	times := specTimes(t, v)
	runs := in.targetRuns("karvi-task-SC1")
	require.Len(t, runs, 3, "three task runs, no more")
	for i, run := range runs {
		require.Equal(t, "sc1", run.intent, "run %d is the intent's", i)
		require.True(t, times.Matches(run.firedFor), "run %d was fired for %s, one of the spec's times", i, run.firedFor)
		require.False(t, run.start.Before(run.firedFor), "run %d started at %s, before its time %s", i, run.start, run.firedFor)
		require.Less(t, run.start.Sub(run.firedFor), 30*time.Second, "run %d started on time", i)
		require.Equal(t, i+1, run.attempt, "each fire is a new attempt")
		require.Equal(t, "completed", run.outcomeStatus)
		if i > 0 {
			require.True(t, run.firedFor.After(runs[i-1].firedFor), "one run per fire")
		}
	}
	require.Empty(t, v.Next, "a converged intent has no next fire")

	list := in.starter("schedule", "list")
	require.Regexp(t, `(?m)^sc1\s+task SC1\s+\*/5 \* \* \* \* \* \*\s+UTC\s+-\s+3/3\s+task SC1 completed\s+converged$`, list)
	require.Contains(t, list, "sc1: converged: max_runs 3 reached")
}

// A target that fails (a skill no template answers to fails its task
// workflow) backs off from the minimum interval, 1 s then 2 s, and the
// third failure opens the circuit: the intent shows error and its
// schedule is paused with a note naming the problem. Fixed (update) and
// unpaused, it fires again with no failure counted.
func TestScheduleFailingIntentBacksOffAndOpensItsCircuit(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass"})
	in := newIntents(t, r)
	d := testrig.Dispatch(t, "SF2", "Refresh the docs index.")
	d.Skill = "no-such-skill"
	r.Track(taskapi.WorkflowID("SF2"))
	bad := in.file("bad.json", testrig.MustJSON(t, d))
	in.starter("schedule", "create", "-name", "sf2", "-cron", "0 0 1 1 *", "-min-interval", "1s", bad)
	require.Contains(t, in.starter("schedule", "trigger", "sf2"), "triggered intent sf2")

	v := in.wait("sf2", "the circuit opened", func(v intentapi.View) bool { return v.Status == intent.StatusError })
	require.Equal(t, 3, v.State.ConsecutiveErrors)
	require.Equal(t, 3, v.State.Errors)
	require.Zero(t, v.State.Runs)
	require.True(t, strings.HasPrefix(v.Note, "error: 3 consecutive failed fires; last: karvi-task-SF2 ended without a result:"), v.Note)
	require.Contains(t, v.Note, `no plan template named "no-such-skill"`)
	require.Equal(t, intent.StatusError, v.State.Status)

	fire := v.State.Recent[len(v.State.Recent)-1]
	require.Equal(t, intent.FireManual, fire.Kind)
	require.Equal(t, intent.ResultError, fire.Result)
	require.Equal(t, 3, fire.Tries)
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, in.timers(fire.ID), "backoff doubles from the minimum interval")
	runs := in.targetRuns("karvi-task-SF2")
	require.Len(t, runs, 3, "one task run per try")
	for _, run := range runs {
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, run.status)
		require.Equal(t, fire.ID, run.fire)
	}

	out, err := in.starterErr("schedule", "trigger", "sf2")
	require.Error(t, err)
	require.Contains(t, out, "intent sf2 is in error (error: 3 consecutive failed fires")
	require.Regexp(t, `(?m)^sf2\s+task SF2\s+0 0 1 1 \*\s+\S+\s+-\s+0/10000\s+-\s+error$`, in.starter("schedule", "list"))

	good := in.file("good.json", testrig.MustJSON(t, testrig.Dispatch(t, "SF2", "Refresh the docs index.")))
	require.Contains(t, in.starter("schedule", "update", "-target", good, "sf2"), "updated intent sf2")
	require.Equal(t, intent.StatusError, in.wait("sf2", "still paused", func(intentapi.View) bool { return true }).Status,
		"an update leaves the circuit open")
	require.Contains(t, in.starter("schedule", "unpause", "sf2"), "unpaused intent sf2")
	in.starter("schedule", "trigger", "sf2")
	v = in.wait("sf2", "a run after the fix", func(v intentapi.View) bool { return v.State.Runs == 1 && v.Firing == "" })
	require.Equal(t, intent.StatusActive, v.Status)
	require.Equal(t, intent.StatusActive, v.State.Status)
	require.Zero(t, v.State.ConsecutiveErrors)
	require.Equal(t, 3, v.State.Errors)
	require.Equal(t, "task SF2 completed", v.State.LastOutcome.String())
}

// A one-shot fires once, at its time: here a run file, started as the
// run's ordinary workflow; the intent converges on its single run.
func TestScheduleRunAtFiresOnce(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass"})
	in := newIntents(t, r)
	for _, id := range []string{"karvi-run-sched-once", "karvi-task-so-a", "karvi-task-so-b"} {
		r.Track(id)
	}
	file := in.file("run.json", []byte(`{"slug":"sched-once","title":"Scheduled once","tasks":[
	 {"id":"so-a","title":"A"},{"id":"so-b","title":"B","depends":["so-a"]}]}`))
	out := in.starter("schedule", "create", "-name", "so3", "-run-at", "+3s", "-min-interval", "1s", file)
	require.Contains(t, out, "fires    run sched-once (Scheduled once), once at ")

	v := in.wait("so3", "converged after its one run", func(v intentapi.View) bool { return v.Status == intent.StatusConverged })
	require.Equal(t, 1, v.State.Runs)
	require.Equal(t, "run sched-once complete", v.State.LastOutcome.String())
	require.True(t, strings.HasPrefix(v.Note, "converged: max_runs 1 reached (run sched-once complete)"), v.Note)
	require.Empty(t, v.Next)

	runs := in.targetRuns("karvi-run-sched-once")
	require.Len(t, runs, 1)
	require.True(t, runs[0].firedFor.Equal(v.Spec.RunAt), "fired for %s, the one-shot's time %s", runs[0].firedFor, v.Spec.RunAt)
	require.False(t, runs[0].start.Before(v.Spec.RunAt))
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, runs[0].status)
	require.Len(t, in.targetRuns("karvi-task-so-b"), 1, "the run's tasks ran as its children")
	require.Len(t, v.State.Recent, 1, "one fire")
	require.Equal(t, intent.FireScheduled, v.State.Recent[0].Kind)
}

// An intent that fires until its task completes: the first attempt's test
// phase fails its three tries (a cargo that fails three times, then
// passes), so the task ends blocked and the intent fires again; the second
// attempt completes and the intent converges on task_completed.
func TestScheduleConvergesWhenTheTaskCompletes(t *testing.T) {
	t.Parallel()
	stubs := t.TempDir()
	count := filepath.Join(stubs, "count")
	require.NoError(t, os.WriteFile(filepath.Join(stubs, "cargo"), fmt.Appendf(nil,
		"#!/bin/sh\nn=$(cat %[1]s 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > %[1]s\n[ $n -gt 3 ]\n", count), 0o755))
	r := testrig.New(t, testrig.Options{Env: []string{"PATH=" + stubs + string(os.PathListSeparator) + os.Getenv("PATH")}})
	in := newIntents(t, r)
	r.Workspace("SC4")
	file := in.dispatch("SC4", "Add user authentication with JWT.")
	in.starter("schedule", "create", "-name", "sc4", "-cron", "*/5 * * * * * *", "-min-interval", "1s",
		"-until", "task_completed", "-max-runs", "10", file)

	v := in.wait("sc4", "converged on the task's completion", func(v intentapi.View) bool { return v.Status == intent.StatusConverged })
	require.Equal(t, 2, v.State.Runs)
	require.True(t, strings.HasPrefix(v.Note, "converged: until task_completed holds after run 2 (task SC4 completed)"), v.Note)
	runs := in.targetRuns("karvi-task-SC4")
	require.Len(t, runs, 2)
	require.Equal(t, []string{"blocked", "completed"}, []string{runs[0].outcomeStatus, runs[1].outcomeStatus})
	require.Equal(t, []int{1, 2}, []int{runs[0].attempt, runs[1].attempt})
	data, err := os.ReadFile(count)
	require.NoError(t, err)
	require.Equal(t, "4", strings.TrimSpace(string(data)), "three failing tries, then the passing one")
}

// The dev server is down across two fire times of three intents firing
// every 30 s. The server's catch-up window (the bound times the gap) lets
// the older missed fire through only to the intent with catch-up 2; each
// intent then runs at most its bound of late fires, the newest, and is
// back on time after. Under defer, what was over the bound is folded into
// one more run, a minimum interval after the catch-up. Which late fires
// run depends on how soon the worker is back (a fire that came due while
// it reconnected is late too), so the test checks the bound, not a list.
func TestScheduleCatchUpAfterServerDowntime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	srv, err := devenv.StartServer(ctx, devenv.ServerOptions{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass", Server: srv})
	in := newIntents(t, r)

	const cron, gap = "*/30 * * * * * *", 30 * time.Second
	cases := []struct {
		name, task string
		catchUp    int
		overflow   string
	}{
		{"cu-skip1", "CU1", 1, "skip"},
		{"cu-skip2", "CU2", 2, "skip"},
		{"cu-defer1", "CU3", 1, "defer"},
	}
	for _, c := range cases {
		in.starter("schedule", "create", "-name", c.name, "-cron", cron, "-min-interval", "2s",
			"-catch-up", fmt.Sprint(c.catchUp), "-overflow", c.overflow, in.dispatch(c.task, "Rebuild the index."))
		v := in.wait(c.name, "created", func(intentapi.View) bool { return true })
		require.Equal(t, time.Duration(c.catchUp)*gap, v.CatchUpWindow.D(), "%s: the catch-up window is the bound times the gap", c.name)
	}

	// Stop the server while nothing fires: right after a round of fires
	// ended, early in its gap.
	var t0 time.Time
	for t0.IsZero() {
		round := time.Time{}
		for _, c := range cases {
			v := in.wait(c.name, "a fire ended", func(v intentapi.View) bool { return v.State.Runs > 0 && v.Firing == "" })
			if last := v.State.Recent[len(v.State.Recent)-1].Nominal; round.IsZero() || last.Before(round) {
				round = last
			}
		}
		if time.Since(round) < gap/3 && allAt(t, in, round) {
			t0 = round
		} else {
			time.Sleep(time.Until(round.Add(gap + time.Second)))
		}
	}
	require.NoError(t, srv.Stop())
	down := time.Now()
	t1, t2, t3 := t0.Add(gap), t0.Add(2*gap), t0.Add(3*gap)
	// Back 15 s after the second missed time: a fire taken less than 10 s
	// after its time is, by the intent's rules, on time, not caught up, so
	// a restart as quick as an idle machine makes it would leave nothing
	// late to check; 15 s plus the restart stays inside the smaller window.
	time.Sleep(time.Until(t2.Add(15 * time.Second)))
	require.NoError(t, srv.Restart(ctx))
	up := time.Now()
	t.Logf("server down from %s to %s; fire times %s and %s missed", down.Format(time.TimeOnly), up.Format(time.TimeOnly),
		t1.Format(time.TimeOnly), t2.Format(time.TimeOnly))
	require.True(t, up.Before(t3), "the restart took until after the next fire time; the case is not the one meant")

	fired := func(v intentapi.View, at time.Time) *intent.FireRecord {
		for i := range v.State.Recent {
			if f := &v.State.Recent[i]; f.Nominal.Equal(at) && f.Kind != intent.FireDeferred {
				return f
			}
		}
		return nil
	}
	backOnTime := func(v intentapi.View) bool {
		for _, f := range v.State.Recent {
			if f.Kind == intent.FireScheduled && f.Result == intent.ResultRan && !f.Nominal.Before(t3) {
				return v.Firing == ""
			}
		}
		return false
	}
	// Once every intent is back on time, pause them all, so that what the
	// intents recorded and what visibility lists hold still.
	for _, c := range cases {
		in.wait(c.name, "back on time after the downtime", backOnTime)
	}
	for _, c := range cases {
		require.NoError(t, in.x.Pause(ctx, c.name, "test: compare"))
	}
	for _, c := range cases {
		v := in.wait(c.name, "no fire under way", func(v intentapi.View) bool { return v.Firing == "" })
		var caughtUp, over int
		var deferred []intent.FireRecord
		ranByFire := map[string]int{}
		for _, f := range v.State.Recent {
			if f.Nominal.Before(t1) {
				continue
			}
			if f.Result == intent.ResultRan {
				ranByFire[f.ID]++
			}
			switch {
			case f.Kind == intent.FireDeferred:
				deferred = append(deferred, f)
			case f.Kind != intent.FireCatchUp:
			case f.Result == intent.ResultRan:
				caughtUp++
			case f.Result == intent.ResultOverflow:
				over++
			case f.Result == intent.ResultOverlap:
				// Due while an earlier fire still ran (a slow machine makes
				// the catch-up fires overlap): skipped, as the policy says,
				// and not run, so it counts against nothing.
			default:
				t.Fatalf("%s: late fire %s ended %s (%s)", c.name, f.ID, f.Result, f.Error)
			}
		}
		// Each of the two missed fires is either let pass by the server
		// (outside the catch-up window when the server took the schedule
		// up again, which a loaded machine makes later than the restart)
		// or taken late.
		letPass := v.MissedCatchUpWindow
		require.LessOrEqual(t, letPass, 2, "%s: only two fires were missed", c.name)
		if letPass < 2 {
			require.GreaterOrEqual(t, caughtUp+over, 1, "%s: something was caught up", c.name)
		} else {
			t.Logf("%s: the server took the schedule up past the window: it let both missed fires pass", c.name)
		}
		require.LessOrEqual(t, caughtUp, c.catchUp, "%s: at most the bound", c.name)
		if c.catchUp == 1 {
			require.Nil(t, fired(v, t1), "%s: the older missed fire is outside the window: never started", c.name)
			require.GreaterOrEqual(t, letPass, 1, "%s: the server let it pass", c.name)
		} else {
			require.Equal(t, letPass == 0, fired(v, t1) != nil,
				"%s: the window let the older missed fire through unless the server came back past it (%d let pass)", c.name, letPass)
		}
		if c.overflow == "defer" {
			require.Len(t, deferred, 1, "%s: one deferred fire stands for those over the bound", c.name)
			require.Equal(t, intent.ResultRan, deferred[0].Result)
			require.True(t, strings.HasPrefix(deferred[0].Outcome, fmt.Sprintf("for %d missed fires; task %s completed", v.MissedCatchUpWindow+over, c.task)),
				"%s: %s", c.name, deferred[0].Outcome)
			require.Zero(t, v.State.Deferred)
		} else {
			require.Empty(t, deferred, c.name)
		}
		// Visibility agrees: one task run for each fire that ran, two for
		// the fire that also ran the deferred one, none for any other.
		runsByFire := map[string]int{}
		for _, run := range in.targetRuns(taskapi.WorkflowID(c.task)) {
			if !run.firedFor.Before(t1) {
				runsByFire[run.fire]++
			}
		}
		require.Equal(t, ranByFire, runsByFire, "%s: task runs by fire", c.name)
	}
}

// allAt reports whether every intent's latest fire is the one at round
// (none is running the next).
func allAt(t *testing.T, in *intents, round time.Time) bool {
	t.Helper()
	views, err := in.x.List(context.Background())
	require.NoError(t, err)
	for _, v := range views {
		if v.Firing != "" || !v.State.Recent[len(v.State.Recent)-1].Nominal.Equal(round) {
			return false
		}
	}
	return true
}

// The cron grammar and the fire times the starter checks an intent with
// are the server's: for expressions across zones, daylight-saving jumps,
// leap days and intervals, package intent names exactly the times the
// server's schedule lists.
func TestScheduleCronTimesAgreeWithTheServer(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{NoWorker: true})
	d := in0(t, r)
	day := func(s string) time.Time {
		at, err := time.Parse(time.DateOnly, s)
		require.NoError(t, err)
		return at
	}
	for i, c := range []struct {
		cron, zone string
		from, to   time.Time
	}{
		{"0 9 * * mon-fri", "Europe/Paris", day("2026-03-20"), day("2026-04-10")},
		{"30 2 * * *", "Europe/Paris", day("2026-03-26"), day("2026-04-01")}, // spring forward: none on the 29th
		{"30 2 * * *", "Europe/Paris", day("2026-10-22"), day("2026-10-28")}, // fall back: twice on the 25th
		{"*/7 */5 * * * * *", "UTC", day("2026-05-01"), day("2026-05-01").Add(12 * time.Minute)},
		{"0 0 29 2 *", "UTC", day("2026-01-01"), day("2033-01-01")},
		{"@every 90m/15m", "UTC", day("2026-06-01"), day("2026-06-03")},
		{"15 10 13 * fri", "America/New_York", day("2026-01-01"), day("2028-01-01")},
		{"0 12 1-7 * 1", "Asia/Kolkata", day("2026-01-01"), day("2026-12-31")},
		{"@weekly", "Australia/Lord_Howe", day("2026-03-01"), day("2026-05-01")},
		{"0 30 1 * * * 2027", "America/Sao_Paulo", day("2026-12-30"), day("2027-01-03")},
		{"0 0 1 jan,jul *", "Pacific/Chatham", day("2026-01-01"), day("2029-01-01")},
	} {
		spec, err := intent.Build(intent.Request{Name: fmt.Sprintf("agree-%d", i), Target: d, Cron: c.cron, TimeZone: c.zone,
			MinInterval: time.Second}, c.from)
		require.NoError(t, err, c.cron)
		opts := intentapi.Options(spec, r.Queue, c.from)
		opts.Paused = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		h, err := r.Client.ScheduleClient().Create(ctx, opts)
		require.NoError(t, err, c.cron)
		resp, err := r.Client.WorkflowService().ListScheduleMatchingTimes(ctx, &workflowservice.ListScheduleMatchingTimesRequest{
			Namespace: r.Server.Namespace, ScheduleId: h.GetID(), StartTime: timestamppb.New(c.from), EndTime: timestamppb.New(c.to)})
		require.NoError(t, h.Delete(ctx))
		cancel()
		require.NoError(t, err, c.cron)
		var server []time.Time
		for _, ts := range resp.StartTime {
			server = append(server, ts.AsTime().UTC())
		}
		times, err := spec.Times()
		require.NoError(t, err)
		var ours []time.Time
		for at := times.Next(c.from); !at.IsZero() && !at.After(c.to); at = times.Next(at) {
			ours = append(ours, at.UTC())
		}
		require.NotEmpty(t, server, "%s in %s", c.cron, c.zone)
		require.Equal(t, server, ours, "%s in %s from %s to %s", c.cron, c.zone, c.from, c.to)
	}
}

// in0 is a target for intents that never fire.
func in0(t *testing.T, r *testrig.Rig) intent.Target {
	t.Helper()
	target, err := intent.ParseTarget(testrig.MustJSON(t, testrig.Dispatch(t, "AGREE", "Never fired.")))
	require.NoError(t, err)
	return target
}
