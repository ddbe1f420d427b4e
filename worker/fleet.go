package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/activities/slotact"
	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/fleet"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows"
)

// A worker is one host of a fleet (docs/fleet.md): besides the shared task
// queue, where attempts start, it polls its host's own queue, where the
// activities of the conductors it started come.

// hostOf is the host this worker names: -host, else the hostname.
func hostOf(c config) (string, error) {
	if c.host != "" {
		return c.host, nil
	}
	return fleet.DefaultHost()
}

// workerOptions are the options of the shared queue's worker and of the
// host's own; the pools' worker takes poolOptions.
//
// WorkerStopTimeout is what a stopping worker gives the activities in
// flight before it cancels them: a delivering tail hands its attempt back
// at once (a checkpoint), a start ends within a second or so, and a stop of
// a conductor needs its TERM-to-KILL grace; a few seconds more cover the
// rest. Whatever is cancelled is retried on the same queue, where the next
// worker of the host takes it up. The activity slots are capacity.go's.
func workerOptions(c config, host string) (shared, own worker.Options, err error) {
	sharedTuner, hostTuner, hs, err := tuners(c.maxActivities, c.timeScale)
	if err != nil {
		return shared, own, err
	}
	base := worker.Options{
		// Workflow tasks are polled by two poller sets, one on the shared
		// queue and one on the worker's sticky queue, each never below
		// workflowPollersMin. The SDK's default (one set that picks a
		// queue per poll) sends every poll to the sticky queue while its
		// backlog hint is above zero, and a task read from the sticky
		// backlog counts itself in that hint: a new workflow's first task,
		// a workflow task that timed out on a dead worker's sticky queue
		// and a query of an uncached workflow then waited up to a minute
		// (a sticky long poll) on a shared queue nobody polled.
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: workflowPollersInitial,
			MinimumNumberOfPollers: workflowPollersMin,
			MaximumNumberOfPollers: workflowPollersMax,
		}),
		// Activity pollers likewise scale with the backlog the server
		// reports: with a fixed 8 each, at 1,000 tasks the next delivery
		// after a phase boundary waited up to 34 s for a poller while its
		// agent wrote on (BENCHMARKS.md §3); scaling them took the p99 of
		// event-to-PATCH from 19.9 s to 5.5 s in the same setting (one
		// run each).
		ActivityTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: activityPollersInitial,
			MinimumNumberOfPollers: activityPollersMin,
			MaximumNumberOfPollers: activityPollersMax,
		}),
		WorkerStopTimeout: c.stopGrace + 5*time.Second,
		// The history's "started by" then names the host.
		Identity: fmt.Sprintf("%d@%s@", os.Getpid(), host),
	}
	shared, own = base, base
	shared.Tuner = sharedTuner
	own.Tuner, own.DisableWorkflowWorker = hostTuner, true
	shared.Interceptors = []interceptor.WorkerInterceptor{&hostGate{host: hs, shared: true}}
	own.Interceptors = []interceptor.WorkerInterceptor{&hostGate{host: hs}}
	return shared, own, nil
}

// The pollers of each worker of the process.
const (
	workflowPollersInitial = 8
	workflowPollersMin     = 2
	workflowPollersMax     = 32
	activityPollersInitial = 8
	activityPollersMin     = 2
	activityPollersMax     = 64
)

// poolOptions are the options of the worker of the slot pools' queue: a
// pool's workflow tasks and its holder checks, no conductor, so neither the
// host's capacity nor its admission gate applies.
func poolOptions(host string) worker.Options {
	return worker.Options{
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: workflowPollersMin,
			MinimumNumberOfPollers: workflowPollersMin,
			MaximumNumberOfPollers: workflowPollersMin * 2,
		}),
		MaxConcurrentActivityTaskPollers: 2,
		Identity:                         fmt.Sprintf("%d@%s@", os.Getpid(), host),
	}
}

// newPoolWorker is the worker of the slot pools' queue (slotapi.PoolQueue).
func newPoolWorker(cl client.Client, shared, host string, acts *slotact.Activities) worker.Worker {
	w := worker.New(cl, slotapi.PoolQueue(shared), poolOptions(host))
	workflows.RegisterPools(w)
	w.RegisterActivity(acts)
	return w
}

// newHostWorker is the worker of the host's own queue: activities only, the
// same ones (one Activities value serves both queues).
func newHostWorker(cl client.Client, shared, host string, o worker.Options, acts *taskact.Activities) worker.Worker {
	w := worker.New(cl, fleet.Queue(shared, host), o)
	w.RegisterActivity(acts)
	return w
}

// stopAll stops the workers together, so that each one's activities learn
// of the stop at once and their drains overlap.
func stopAll(ws ...worker.Worker) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.Stop)
	}
	wg.Wait()
}

// sweepStaleRuns runs the fence once the worker polls, then every
// fenceEvery while it runs: every conductor still running under the work
// root whose task's workflow has moved on (another attempt, another host)
// is stopped. The returned channel closes when ctx ends.
func sweepStaleRuns(ctx context.Context, cl client.Client, acts *taskact.Activities, host string, every time.Duration, logger *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	handles := map[fleet.Run]taskact.LiveRun{}
	var mu sync.Mutex
	s := &fleet.Sweeper{
		Host:  host,
		Log:   logger,
		Scale: acts.Config.Scale,
		Live: func() ([]fleet.Run, error) {
			live, err := acts.LiveRuns("")
			if err != nil {
				// A record that cannot be read cannot be stopped either;
				// the others are swept all the same.
				logger.Warn("fence: some run records could not be read", "error", err)
			}
			mu.Lock()
			defer mu.Unlock()
			runs := make([]fleet.Run, 0, len(live))
			for _, l := range live {
				r := fleet.Run{TaskID: l.TaskID, Plan: l.Plan, Dir: filepath.Base(l.Dir)}
				handles[r] = l
				runs = append(runs, r)
			}
			return runs, nil
		},
		Ask: func(ctx context.Context, taskID string) (fleet.Current, bool, error) {
			return currentAttempt(ctx, cl, taskID)
		},
		Stop: func(ctx context.Context, r fleet.Run, why string) error {
			mu.Lock()
			l := handles[r]
			mu.Unlock()
			return acts.StopRun(ctx, l, mapping.RuntimeStop{By: mapping.StopBySweep, Host: host, Why: why})
		},
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for first := true; ; first = false {
			n, err := s.Sweep(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				logger.Warn("fence: the sweep of live conductors failed", "error", err)
			case first || n > 0:
				logger.Info("fence: live conductors swept", "host", host, "stopped", n)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// fenceEvery is how often a running worker sweeps again: a host taken for
// lost while it ran on (its deliveries late, not its worker gone) keeps
// its conductors, and only a sweep stops those whose task moved on. The
// worker's time scale divides it.
const fenceEvery = time.Minute

// fenceEveryAt is fenceEvery at the time scale s.
func fenceEveryAt(s timescale.Scale) time.Duration { return s.Of(fenceEvery) }

// fenceEveryEnv sets the sweep period alone, whatever the time scale. It
// is for tests, where a phase must outlive many sweeps in seconds while
// every other period keeps its length; an operator has no reason to
// change the period, so it is no flag.
const fenceEveryEnv = "KARVI_EDDA_FENCE_EVERY"

// fencePeriod is the sweep period: fenceEvery at the time scale s, unless
// fenceEveryEnv says.
func fencePeriod(getenv func(string) string, s timescale.Scale) (time.Duration, error) {
	v := getenv(fenceEveryEnv)
	if v == "" {
		return fenceEveryAt(s), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 1m or 500ms", fenceEveryEnv, v)
	}
	return d, nil
}

// currentAttempt asks a task's workflow (its status query) which attempt is
// current and on which host; found is false when the task has no workflow.
func currentAttempt(ctx context.Context, cl client.Client, taskID string) (fleet.Current, bool, error) {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := taskapi.Tasks{Client: cl}.Status(qctx, taskID)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return fleet.Current{}, false, nil
	}
	if err != nil {
		return fleet.Current{}, false, fmt.Errorf("query the status of task %s: %w", taskID, err)
	}
	return fleet.Current{Attempt: s.Attempt, Plan: s.PlanName, Host: s.Host, Starting: s.Stage == taskapi.StagePrepare}, true, nil
}
