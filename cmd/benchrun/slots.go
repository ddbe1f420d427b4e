package main

import (
	"context"
	"fmt"
	"os"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/slots"
	"karvi-edda-temporal/testkit/karvifake"
)

// SlotBench is an agent slot pool serving a long line.
type SlotBench struct {
	// Worker is "now", or "before" for the worker of
	// BENCH_SLOTS_BEFORE_BIN, run first on the same server.
	Worker        string `json:"worker"`
	Tasks         int    `json:"tasks"`
	MaxConcurrent int    `json:"maxConcurrent"`
	Plan          string `json:"plan"`
	// PeakWaiters is the longest line the pool's view showed.
	PeakWaiters int `json:"peakWaiters"`
	// Seconds is how long the line took to drain once its slots were freed.
	Seconds float64 `json:"seconds"`
	// Handoff is, per grant made when a slot came free, the time from the
	// release reaching the pool to the grant reaching the waiting task's
	// workflow (both as the server stamped them in history): the pool's
	// share of a waiter's wait.
	Handoff bench.Summary `json:"handoff"`
	// Acquire is the ask to the pool's taking it, as the task's history
	// times it: the AcquireSlot activity scheduled to completed (the
	// update's answer included), or the acquire signal initiated to its
	// being recorded in the pool's history.
	Acquire bench.Summary `json:"acquire"`
	// Answer is the ask to the task knowing the pool's answer: the
	// update's result, or, asked by signal, the pool's first notice (the
	// grant or the place in line) reaching the task's workflow.
	Answer bench.Summary `json:"answer"`
	// AcquireQueued is the AcquireSlot activity's wait for a worker
	// (scheduled to started); AcquireCall its run (started to completed):
	// the ask itself, a batch's wait and update included.
	AcquireQueued bench.Summary `json:"acquireQueued"`
	AcquireCall   bench.Summary `json:"acquireCall"`
	// Wait is the whole wait of the tasks that queued: acquire scheduled
	// to grant received. Mostly the line, not the pool.
	Wait        bench.Summary     `json:"wait"`
	PoolHistory bench.HistoryCost `json:"poolHistory"`
	// WorkerMB and ServerMB are peak RSS over the scenario.
	WorkerMB float64 `json:"workerMB"`
	ServerMB float64 `json:"serverMB"`
	Load     string  `json:"load"`
	Error    string  `json:"error,omitempty"`
}

// slotPlan: one phase of 20 ms, so a slot is held for little more than a
// conductor's start and end.
const slotPlan = "[sim checks=pass delay=20ms cost=0.01]"

// slotsScenario lines up 200 tasks behind a pool of 4 whose slots are all
// held, then frees them, and measures how fast each released slot reaches
// the next waiter while the line drains.
func (e *env) slotsScenario(ctx context.Context) error {
	if dir := os.Getenv("BENCH_SLOTS_BEFORE_BIN"); dir != "" {
		if err := e.oneSlots(ctx, "before", rigOptions{binDir: dir}); err != nil {
			return err
		}
	}
	return e.oneSlots(ctx, "now", rigOptions{})
}

func (e *env) oneSlots(ctx context.Context, worker string, o rigOptions) error {
	limit := 4
	n := e.pick(200, 20)
	o.fakeLimit = karvifake.RateLimitOff
	o.args = append([]string{"-karvi-rate-limit", "off"}, o.args...)
	r, err := e.newRigWith("slots-"+worker, o)
	if err != nil {
		return err
	}
	defer r.close()
	pool := "bench-slots-" + worker
	// An older worker runs pools on the shared queue itself.
	if err := setPool(ctx, e.cl, r.queue, pool, limit, o.binDir != ""); err != nil {
		return err
	}
	// The holders hang until aborted: the line forms behind them.
	var holders, tasks []*task
	for i := range limit {
		t, err := r.newTask(fmt.Sprintf("slot-%s-hold-%d", worker, i), "single", "[sim hang=forever]", nil)
		if err != nil {
			return err
		}
		t.slots = &taskapi.SlotRequest{Pool: pool}
		holders = append(holders, t)
	}
	for i := range n {
		t, err := r.newTask(fmt.Sprintf("slot-%s-%03d", worker, i), "single", slotPlan, nil)
		if err != nil {
			return err
		}
		t.slots = &taskapi.SlotRequest{Pool: pool}
		tasks = append(tasks, t)
	}
	if err := r.run(ctx, holders, runOptions{}); err != nil {
		return err
	}
	if err := waitPool(ctx, e.cl, pool, func(v slotapi.View) bool { return len(v.Holders) == limit }); err != nil {
		return fmt.Errorf("holders: %w", err)
	}
	res := SlotBench{Worker: worker, Tasks: n, MaxConcurrent: limit, Plan: slotPlan, Load: loadAvg()}
	rss := sampleRSS([]int{r.worker.PID(), e.serverPID}, 500*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, tasks, runOptions{wait: true, timeout: 20 * time.Minute}) }()
	if err := waitPool(ctx, e.cl, pool, func(v slotapi.View) bool {
		res.PeakWaiters = max(res.PeakWaiters, len(v.Waiters))
		return len(v.Waiters) == n
	}); err != nil {
		return fmt.Errorf("line: %w", err)
	}
	started := time.Now()
	for _, t := range holders {
		if err := (taskapi.Tasks{Client: e.cl}).Abort(ctx, t.id, "", "free the slots"); err != nil {
			return err
		}
	}
	if err := <-done; err != nil {
		res.Error = firstLine(err.Error())
	}
	res.Seconds = time.Since(started).Seconds()
	rss.stop()
	res.WorkerMB, res.ServerMB = rss.of(r.worker.PID()), rss.of(e.serverPID)
	if err := res.measure(ctx, e.cl, pool, tasks); err != nil {
		return err
	}
	e.results.Slots = append(e.results.Slots, res)
	e.logf("slots (%s worker): RSS worker %.0f MB, server %.0f MB", worker, res.WorkerMB, res.ServerMB)
	e.logf("slots: first notice p50/p99 %.1f/%.1f ms", res.Answer.P50, res.Answer.P99)
	e.logf("slots: acquire waiting for a worker p50/p99 %.1f/%.1f ms, the call p50/p99 %.1f/%.1f ms",
		res.AcquireQueued.P50, res.AcquireQueued.P99, res.AcquireCall.P50, res.AcquireCall.P99)
	e.logf("slots: %d waiters behind a pool of %d: hand-off p50/p99/max %.1f/%.1f/%.1f ms; acquire p50/p99 %.1f/%.1f ms; line drained in %.0fs; pool history %d events in %d runs; %s",
		n, limit, res.Handoff.P50, res.Handoff.P99, res.Handoff.Max, res.Acquire.P50, res.Acquire.P99,
		res.Seconds, res.PoolHistory.Events, res.PoolHistory.Runs, res.Error)
	return nil
}

// waitPool polls the pool's view until cond holds, for at most 5 minutes.
func waitPool(ctx context.Context, cl client.Client, pool string, cond func(slotapi.View) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		if view, err := (slotapi.Pools{Client: cl}).View(ctx, pool); err == nil && cond(view) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool %s: %w", pool, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// setPool creates the pool with its limit, as `starter slots set` does
// (onShared: on the shared queue, as workers before slotapi.PoolQueue did).
func setPool(ctx context.Context, cl client.Client, queue, pool string, limit int, onShared bool) error {
	in := slotapi.PoolInput{Pool: pool, Limits: &slots.Limits{MaxConcurrent: limit}}
	pools := slotapi.Pools{Client: cl, TaskQueue: queue, OnShared: onShared}
	if _, err := pools.Set(ctx, in, slotapi.SetRequest{MaxConcurrent: limit}); err != nil {
		return fmt.Errorf("set pool %s: %w", pool, err)
	}
	return nil
}

// measure reads the pool's and the tasks' histories: when each release
// reached the pool, which grant it caused, and when that grant reached its
// task.
func (res *SlotBench) measure(ctx context.Context, cl client.Client, pool string, tasks []*task) error {
	id := slotapi.WorkflowID(pool)
	d, err := slotapi.Pools{Client: cl}.Describe(ctx, pool)
	if err != nil {
		return fmt.Errorf("describe pool %s: %w", pool, err)
	}
	first := d.GetWorkflowExecutionInfo().GetFirstRunId()
	if res.PoolHistory, err = bench.History(ctx, cl, id, first); err != nil {
		return err
	}
	// The release before each grant notice caused it: the pool grants only
	// when a slot comes free (or its limits change, which this scenario
	// does not do). A notice sent again after a continue-as-new counts once.
	causedAt := map[string]time.Time{}
	var lastRelease time.Time
	dc := converter.GetDefaultDataConverter()
	for run := first; run != ""; {
		next := ""
		err := eachEvent(ctx, cl, id, run, func(ev *historypb.HistoryEvent) error {
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == slotapi.SignalRelease {
				lastRelease = ev.GetEventTime().AsTime()
			}
			if a := ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes(); a != nil && a.GetSignalName() == slotapi.SignalSlot {
				var nt slotapi.Notice
				if err := dc.FromPayloads(a.GetInput(), &nt); err != nil {
					return fmt.Errorf("pool notice: %w", err)
				}
				if _, seen := causedAt[nt.Key.Task]; !seen && nt.Answer.State == slots.Granted && !lastRelease.IsZero() {
					causedAt[nt.Key.Task] = lastRelease
				}
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
			return nil
		})
		if err != nil {
			return err
		}
		run = next
	}
	var handoffs, acquires, waits, answers, queued, calls []time.Duration
	for _, t := range tasks {
		// The ask is the AcquireSlot activity (an update, answered in its
		// result), or the acquire signal to the pool, taken when the pool
		// recorded it (a place in line is not answered then; when no pool
		// ran, the AskSlot activity that starts it).
		var scheduled, started, answered, granted, noticed time.Time
		byUpdate := false
		askID := int64(0)
		err := eachEvent(ctx, cl, taskapi.WorkflowID(t.id), t.runID, func(ev *historypb.HistoryEvent) error {
			at := ev.GetEventTime().AsTime()
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && askID == 0 {
				if n := a.GetActivityType().GetName(); n == "AcquireSlot" || n == "AskSlot" {
					askID, scheduled, byUpdate = ev.GetEventId(), at, n == "AcquireSlot"
				}
			}
			if a := ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes(); a != nil && a.GetSignalName() == signalAcquire && askID == 0 {
				askID, scheduled = ev.GetEventId(), at
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetScheduledEventId() == askID && started.IsZero() {
				started = at
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && a.GetScheduledEventId() == askID && answered.IsZero() {
				answered = at
			}
			if a := ev.GetExternalWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetInitiatedEventId() == askID && answered.IsZero() {
				answered = at
			}
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == slotapi.SignalSlot {
				var nt slotapi.Notice
				if err := dc.FromPayloads(a.GetInput(), &nt); err != nil {
					return fmt.Errorf("slot notice: %w", err)
				}
				if nt.Answer.State == slots.Granted && granted.IsZero() {
					granted = at
				}
				if noticed.IsZero() {
					noticed = at
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !answered.IsZero() {
			acquires = append(acquires, answered.Sub(scheduled))
			if !started.IsZero() {
				queued, calls = append(queued, started.Sub(scheduled)), append(calls, answered.Sub(started))
			}
		}
		switch {
		case byUpdate && !answered.IsZero():
			answers = append(answers, answered.Sub(scheduled)) // the update's result is the answer
		case !byUpdate && !noticed.IsZero() && !scheduled.IsZero():
			answers = append(answers, noticed.Sub(scheduled))
		}
		if granted.IsZero() {
			continue // granted at once by its acquire
		}
		waits = append(waits, granted.Sub(scheduled))
		if at, ok := causedAt[t.id]; ok {
			handoffs = append(handoffs, granted.Sub(at))
		}
	}
	res.Handoff, res.Acquire, res.Wait = bench.Summarize(handoffs), bench.Summarize(acquires), bench.Summarize(waits)
	res.Answer = bench.Summarize(answers)
	res.AcquireQueued, res.AcquireCall = bench.Summarize(queued), bench.Summarize(calls)
	return nil
}

func eachEvent(ctx context.Context, cl client.Client, id, run string, f func(*historypb.HistoryEvent) error) error {
	it := cl.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fmt.Errorf("history of %s: %w", id, err)
		}
		if err := f(ev); err != nil {
			return err
		}
	}
	return nil
}

// signalAcquire is the acquire signal of a worker that asked its pool by
// signal (tried, measured in BENCHMARKS.md §7, and not kept): the
// measure still reads such histories.
const signalAcquire = "acquire"
