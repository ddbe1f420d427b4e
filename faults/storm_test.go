//go:build realserver

package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// assertConsistent checks that a finished task tells one story everywhere:
// the workflow result, karvi's task status and blocker, karvi's brief, the
// workflow's brief and the conductor's own events. It returns the plan the
// brief belongs to.
func (r *rig) assertConsistent(id string, res taskapi.Result) string {
	t := r.T()
	t.Helper()
	o := res.Outcome
	require.Contains(t, []string{"completed", "blocked"}, string(o.TaskStatus), "%s outcome", id)
	require.Equal(t, string(o.TaskStatus), r.KarviStatus(id), "%s: karvi status vs workflow result", id)
	task, _ := r.Karvi.Task(id)
	if o.TaskStatus == "blocked" {
		require.NotNil(t, task.Blocker, id)
		require.Equal(t, o.BlockerReason, task.Blocker.Reason, "%s: karvi blocker vs workflow result", id)
	}

	// Every attempt ended once, the last as the outcome says.
	require.Len(t, res.Attempts, res.Attempt, "%s: one summary per attempt", id)
	last := res.Attempts[len(res.Attempts)-1]
	if o.LastError == "Plan aborted by user" {
		require.Equal(t, "aborted", last.Ended, id)
	} else {
		require.Equal(t, string(o.TaskStatus), last.Ended, id)
	}
	dirs, err := filepath.Glob(filepath.Join(r.WorkRoot, "runs", id, "*"))
	require.NoError(t, err)
	require.LessOrEqual(t, len(dirs), res.Attempt, "%s: a run directory per prepared attempt at most", id)
	for _, a := range res.Attempts {
		if a.PlanName != "" {
			r.atMostOneRun(id, a.PlanName)
		}
	}

	// An abort acted on before the attempt was prepared leaves the brief of
	// the attempt before; find the plan the brief is about.
	plan := res.PlanName
	for i := len(res.Attempts) - 1; plan == "" && i >= 0; i-- {
		plan = res.Attempts[i].PlanName
	}
	require.NotEmpty(t, plan, "%s: no attempt was ever prepared", id)
	brief := r.KarviBrief(id)
	require.Equal(t, brief, testrig.Normalize(testrig.DropNulls(testrig.JSONValue(t, res.Brief))), "%s: karvi brief vs workflow brief", id)
	// The conductor's truth decides: a plan that completed is a completed
	// task, and a completed task's plan completed. Any other end settles
	// the brief with the outcome.
	completed := hasEvent(r.EventsPath(id, plan), "plan_completed", "")
	if completed {
		require.Equal(t, r.reducedBrief(id, plan), brief, "%s: brief vs the conductor's events", id)
	} else {
		require.Equal(t, r.settledBrief(id, plan, o), brief, "%s: brief vs the conductor's events, settled", id)
	}
	require.Equal(t, completed, o.TaskStatus == "completed", "%s: plan_completed written %v, task %s", id, completed, o.TaskStatus)
	if completed {
		require.Equal(t, testrig.ExampleBriefFor(t, id, plan), brief, "%s: completed brief", id)
	}
	return plan
}

// Two bursts of 100 signals against a real worker while the test phase runs:
// one a seeded mix of abort and redispatch, one all redispatch. Each task
// must come to one consistent end, with every signal counted, and the
// process table, sampled every 20 ms, must never show two live conductors
// for a task.
func TestSignalStorm(t *testing.T) {
	seed := faultSeed(t)
	rnd := rand.New(rand.NewPCG(seed, 0x73746f726d))
	r := newRig(t, testrig.Options{Sink: "karvi"})
	const mix, redo, burst = "STORM-MIX", "STORM-REDO", 100
	msg := exampleMessage(300, 4000, 300, "")
	runs := map[string]client.WorkflowRun{}
	for _, id := range []string{mix, redo} {
		r.Workspace(id)
		runs[id] = r.Start(testrig.Dispatch(t, id, msg))
	}
	for _, id := range []string{mix, redo} {
		r.WaitPhase(id, "test")
	}

	sampler := r.SampleConductors()
	signals := map[string][]string{}
	for i := 0; i < burst; i++ {
		kind := taskapi.SignalRedispatch
		if rnd.IntN(2) == 0 {
			kind = taskapi.SignalAbort
		}
		signals[mix] = append(signals[mix], kind)
		signals[redo] = append(signals[redo], taskapi.SignalRedispatch)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	accepted := make([]int, 2)
	start := time.Now()
	for i, id := range []string{mix, redo} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n, kind := range signals[id] {
				var arg any = taskapi.RedispatchSignal{Reason: fmt.Sprintf("storm %d", n)}
				if kind == taskapi.SignalAbort {
					arg = taskapi.AbortSignal{Reason: fmt.Sprintf("storm %d", n)}
				}
				err := r.Signal(id, kind, arg)
				var nf *serviceerror.NotFound
				if errors.As(err, &nf) && i == 0 {
					return // an abort of the burst ended the task: Temporal refuses the rest
				}
				if err != nil {
					errs[i] = fmt.Errorf("%s signal %d (%s): %w", id, n, kind, err)
					return
				}
				accepted[i]++
			}
		}()
	}
	wg.Wait()
	burstTook := time.Since(start)
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, burst, accepted[1], "all-redispatch burst: the task stays open throughout")

	res := map[string]taskapi.Result{}
	for id, run := range runs {
		res[id] = r.Result(run)
	}
	samples := sampler.Stop(t)
	for i, id := range []string{mix, redo} {
		plan := r.assertConsistent(id, res[id])
		st, err := r.Status(id)
		require.NoError(t, err)
		require.Equal(t, accepted[i], st.SignalsReceived, "%s: every signal Temporal accepted counted once", id)
		t.Logf("%s: %s after %d attempts (%v), brief of %s; %d of %d signals accepted, %d folded or ignored",
			id, res[id].Outcome.TaskStatus, res[id].Attempt, res[id].Attempts, plan, st.SignalsReceived, burst, st.SignalsIgnored)
	}
	// All redispatches: nothing may stop the task for good.
	require.EqualValues(t, "completed", res[redo].Outcome.TaskStatus)
	t.Logf("2 bursts of %d signals in %s; %d process-table samples, never two live conductors for a task",
		burst, burstTook.Round(time.Millisecond), samples)
	r.AssertNoOrphans()
}

// An abort races the end of the last phase, ten times with seeded jitter
// around the moment docs finishes. Whichever wins, the task tells one story
// (see assertConsistent); an abort that arrives after the workflow closed is
// refused by Temporal and the task stays completed.
func TestAbortRacingCompletion(t *testing.T) {
	seed := faultSeed(t)
	rnd := rand.New(rand.NewPCG(seed, 0x72616365))
	r := newRig(t, testrig.Options{Sink: "karvi"})
	const races, docs = 10, 1200
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sampler := r.SampleConductors()
	type race struct {
		id     string
		offset time.Duration
		run    client.WorkflowRun
		late   bool // the abort found the workflow closed
		err    error
	}
	rs := make([]*race, races)
	var wg sync.WaitGroup
	for i := range rs {
		// From 600 ms before docs ends (the abort then has time to stop
		// the conductor) to 400 ms after (the workflow may already be done).
		c := &race{id: fmt.Sprintf("RACE%d", i), offset: time.Duration(rnd.IntN(1001)-600) * time.Millisecond}
		rs[i] = c
		r.Workspace(c.id)
		c.run = r.Start(testrig.Dispatch(t, c.id, exampleMessage(200, 200, docs, "")))
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Not Eventually: this goroutine must not end the test.
			if c.err = wait.Poll(ctx, 5*time.Millisecond, c.id+" to reach docs", func() (any, bool) {
				events := r.EventsPath(c.id, r.PlanName(c.id, 1))
				return "no phase_start of docs in " + events, hasEvent(events, "phase_start", "docs")
			}); c.err != nil {
				return
			}
			// The jitter is the fault: where the abort lands is the test's
			// seeded choice, never what it asserts.
			time.Sleep(docs*time.Millisecond + c.offset)
			err := r.Signal(c.id, taskapi.SignalAbort, taskapi.AbortSignal{Reason: "race"})
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				c.late = true
				err = nil
			}
			c.err = err
		}()
	}
	wg.Wait()
	outcomes := map[string]int{}
	for _, c := range rs {
		require.NoError(t, c.err, c.id)
		res := r.Result(c.run)
		r.assertConsistent(c.id, res)
		st, err := r.Status(c.id)
		require.NoError(t, err)
		if c.late {
			require.EqualValues(t, "completed", res.Outcome.TaskStatus, "%s: the abort came after the end", c.id)
			require.Zero(t, st.SignalsReceived, c.id)
			outcomes["completed, abort refused (workflow closed)"]++
			continue
		}
		require.Equal(t, 1, st.SignalsReceived, c.id)
		switch {
		case res.Outcome.TaskStatus == "completed":
			require.Equal(t, 1, st.SignalsIgnored, "%s: the abort had nothing to stop", c.id)
			outcomes["completed, abort ignored"]++
		default:
			require.Equal(t, "Plan aborted by user", res.Outcome.LastError, c.id)
			outcomes["aborted"]++
		}
		t.Logf("%s: abort at docs end %+dms: %s", c.id, c.offset.Milliseconds(), res.Outcome.TaskStatus)
	}
	samples := sampler.Stop(t)
	t.Logf("%d races: %v; %d process-table samples, never two live conductors for a task", races, outcomes, samples)
	r.AssertNoOrphans()
}
