package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/karvifake"
)

// contender names a way of getting events to karvi.
type contender string

const (
	temporalC contender = "temporal"
	directC   contender = contender(bench.Notify)
	pollC     contender = contender(bench.Poll)
)

// rig is one worker process with its own task queue, work root and karvi
// fakes: one for the worker and, side by side, one per comparison loop.
type rig struct {
	e        *env
	name     string
	dir      string
	workRoot string
	layout   activities.Layout
	queue    string
	worker   *devenv.Worker
	pprof    string
	// metrics is the worker's Prometheus endpoint, when it serves one.
	metrics string
	fakes   map[contender]*karvifake.Server
	clients map[contender]*karvi.Client
}

// rigOptions shape a rig's karvi fakes and worker beyond the defaults.
type rigOptions struct {
	// fakeLimit is the fakes' karvifake.Options.RateLimit.
	fakeLimit int
	// binDir, when set, holds the worker binary to run instead of the
	// built one (an older build, for a before/after figure).
	binDir string
	args   []string
	// env is added to the worker's environment.
	env []string
}

// newRig starts a rig whose karvi fakes and worker run without karvi's
// rate limit: the scenarios measure the runtime, not karvi's limit (the
// karvi scenario measures that).
func (e *env) newRig(name string, workerArgs ...string) (*rig, error) {
	return e.newRigWith(name, rigOptions{fakeLimit: karvifake.RateLimitOff,
		args: append([]string{"-karvi-rate-limit", "off"}, workerArgs...)})
}

func (e *env) newRigWith(name string, o rigOptions) (*rig, error) {
	dir := filepath.Join(e.out, "runs", name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	r := &rig{e: e, name: name, dir: dir, workRoot: filepath.Join(dir, "work"),
		queue: "bench-" + name, fakes: map[contender]*karvifake.Server{}, clients: map[contender]*karvi.Client{}}
	if err := os.MkdirAll(r.workRoot, 0o755); err != nil {
		return nil, err
	}
	layout, err := activities.NewLayout(r.workRoot)
	if err != nil {
		return nil, err
	}
	r.layout = layout
	for _, c := range []contender{temporalC, directC, pollC} {
		f := karvifake.New(karvifake.Options{RateLimit: o.fakeLimit})
		url, err := f.Start()
		if err != nil {
			r.close()
			return nil, err
		}
		r.fakes[c] = f
		kc, err := fakeClient(url, o.fakeLimit)
		if err != nil {
			r.close()
			return nil, err
		}
		r.clients[c] = kc
	}
	port, err := devenv.FreePort()
	if err != nil {
		r.close()
		return nil, err
	}
	r.pprof = fmt.Sprintf("127.0.0.1:%d", port)
	args := append(append([]string{"-pprof-addr", r.pprof}, e.workerArgs...), o.args...)
	if o.binDir != "" {
		// devenv finds the worker binary through KARVI_EDDA_BIN.
		old, had := os.LookupEnv("KARVI_EDDA_BIN")
		_ = os.Setenv("KARVI_EDDA_BIN", o.binDir)
		defer func() {
			if had {
				_ = os.Setenv("KARVI_EDDA_BIN", old)
			} else {
				_ = os.Unsetenv("KARVI_EDDA_BIN")
			}
		}()
	}
	w, err := devenv.StartWorker(devenv.WorkerOptions{
		Addr: e.serverAddr, Namespace: e.namespace, TaskQueue: r.queue, WorkRoot: r.workRoot, Conductor: e.sim,
		Sink: "karvi", KarviURL: r.fakes[temporalC].URL(), Templates: e.templates,
		LogPath: filepath.Join(dir, "worker.log"), Args: args, Env: o.env,
	})
	if err != nil {
		r.close()
		return nil, err
	}
	r.worker = w
	return r, nil
}

// fakeClient is the harness's client of a karvi fake started with
// karvifake.Options.RateLimit fakeLimit, keeping the fake's limit and no
// other. The comparison loops PATCH through it once per event, and a rig
// keeps its fakes for every run of a scenario: with the client's default
// (karvi's 120 a minute) the first run spends most of the bucket, and the
// later runs' loops are paced to a PATCH every half second, fall seconds
// behind their events and are still sending long after the workflows
// ended.
func fakeClient(url string, fakeLimit int) (*karvi.Client, error) {
	limit := fakeLimit
	switch {
	case limit == 0:
		limit = karvifake.DefaultRateLimit
	case limit < 0:
		limit = karvi.RateLimitOff
	}
	return karvi.New(url, "", karvi.WithRateLimit(limit))
}

func (r *rig) close() {
	if r.worker != nil {
		if err := r.worker.Stop(); err != nil {
			r.e.logf("stop worker of %s: %v", r.name, err)
		}
	}
	if err := devenv.StopConductors(r.workRoot); err != nil {
		r.e.logf("stop conductors of %s: %v", r.name, err)
	}
	for _, f := range r.fakes {
		f.Close()
	}
}

// task is one karvi task run through the worker (and, side by side, the
// comparison loops).
type task struct {
	id       string
	dispatch mapping.DispatchPlan
	tuning   *taskapi.Tuning
	slots    *taskapi.SlotRequest // the pool it waits for, if any
	// cwd is the task's working directory; eventsPath its conductor's
	// event log, known once the workflow started (the plan name carries
	// the workflow chain's nonce, from its first run id).
	cwd        string
	eventsPath string
	summary    mapping.PlanSummary
	runID      string
	started    time.Time
	ended      time.Time
	result     taskapi.Result
	err        error
	loops      map[contender]bench.LoopStats
}

// newTask builds a dispatch from example A's with the simulator
// directives in its message, and works out where its events will be.
func (r *rig) newTask(id, skill, directives string, tuning *taskapi.Tuning) (*task, error) {
	d := r.e.exampleDispatch
	d.TaskID = id
	d.Skill = skill
	d.Message = "Add user authentication with JWT. " + directives
	tmpl, err := r.e.tmpls.Select(d)
	if err != nil {
		return nil, err
	}
	plan, err := mapping.BuildPlan(d, 1, tmpl)
	if err != nil {
		return nil, err
	}
	cwd, err := r.layout.TaskCwd(d)
	if err != nil {
		return nil, err
	}
	return &task{id: id, dispatch: d, tuning: tuning, summary: plan.Summary(), cwd: cwd}, nil
}

// startedAs records a task's run id and, from it, where its first attempt's
// conductor writes its events: the attempt's plan name is
// mapping.AttemptPlanName of the task, attempt 1 and the chain's nonce,
// as the starter works it out.
func (t *task) startedAs(runID string) {
	t.runID = runID
	plan := mapping.AttemptPlanName(t.id, 1, mapping.AttemptNonce(taskapi.WorkflowID(t.id), runID))
	t.eventsPath = filepath.Join(t.cwd, ".edda", "conductor", plan, "events.jsonl")
}

type runOptions struct {
	sideBySide bool
	// spread starts the tasks evenly over this long instead of at once.
	spread time.Duration
	// wait for the workflows to end; false returns once all are started.
	wait    bool
	timeout time.Duration
}

// run adds the tasks to the fakes, starts the comparison loops (which wait
// for the log to appear), starts every workflow at once and waits for them.
func (r *rig) run(ctx context.Context, tasks []*task, o runOptions) error {
	for _, t := range tasks {
		for c, f := range r.fakes {
			if c != temporalC && !o.sideBySide {
				continue
			}
			if err := f.AddTask(karvifake.Task{ID: t.id, Status: "pending", BriefPath: true, Brief: json.RawMessage(`{}`)}); err != nil {
				return err
			}
		}
	}
	loopCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	var loops sync.WaitGroup
	var loopMu sync.Mutex
	var loopErrs []error
	// The comparison loops of a task start as soon as its workflow has
	// (its event log's path needs the run id), well before its conductor
	// can write: they wait for the log to appear.
	var onStart func(t *task)
	if o.sideBySide {
		for _, t := range tasks {
			t.loops = map[contender]bench.LoopStats{}
		}
		onStart = func(t *task) {
			for _, c := range []contender{directC, pollC} {
				l := bench.Loop{Mode: bench.LoopMode(c), EventsPath: t.eventsPath, TaskID: t.id,
					Summary: t.summary, Karvi: r.clients[c]}
				loops.Add(1)
				go func() {
					defer loops.Done()
					st, err := l.Run(loopCtx)
					loopMu.Lock()
					defer loopMu.Unlock()
					t.loops[c] = st
					if err != nil {
						loopErrs = append(loopErrs, err)
					}
				}()
			}
		}
	}

	if err := r.start(ctx, tasks, o.spread, onStart); err != nil {
		return err
	}
	if !o.wait {
		return nil
	}
	timeout := o.timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.result, t.err = taskapi.Tasks{Client: r.e.cl}.Result(wctx, t.id, "")
			t.ended = time.Now()
		}()
	}
	wg.Wait()
	var errs []error
	for _, t := range tasks {
		if t.err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", t.id, t.err))
		} else if t.result.Outcome.TaskStatus != "completed" {
			errs = append(errs, fmt.Errorf("task %s ended %s: %s", t.id, t.result.Outcome.TaskStatus, t.result.Outcome.LastError))
		}
	}
	if o.sideBySide {
		// The loops end on the terminal event; a loop still waiting well
		// after its workflow ended has lost the race for good.
		done := make(chan struct{})
		go func() { loops.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			errs = append(errs, errors.New("comparison loops still running 15s after the workflows ended"))
			stopLoops()
			<-done
		}
		errs = append(errs, loopErrs...)
	}
	return errors.Join(errs...)
}

// start starts every task's workflow, many at once, and calls onStart (if
// not nil) for each task once its workflow has started.
func (r *rig) start(ctx context.Context, tasks []*task, spread time.Duration, onStart func(*task)) error {
	sem := make(chan struct{}, 64)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, t := range tasks {
		if spread > 0 {
			time.Sleep(time.Until(t0.Add(spread * time.Duration(i) / time.Duration(len(tasks)))))
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t.started = time.Now()
			run, err := taskapi.Tasks{Client: r.e.cl, TaskQueue: r.queue}.Start(ctx,
				taskapi.TaskInput{Dispatch: t.dispatch, Tuning: t.tuning, Slots: t.slots}, taskapi.StartOptions{})
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("start %s: %w", t.id, err))
				mu.Unlock()
				return
			}
			t.startedAs(run.GetRunID())
			if onStart != nil {
				onStart(t)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// latencies matches each task's events with one contender's PATCHes.
func (r *rig) latencies(tasks []*task, c contender) (bench.MatchResult, error) {
	var all bench.MatchResult
	for _, t := range tasks {
		events, err := bench.ReadEvents(t.eventsPath)
		if err != nil {
			return all, err
		}
		m := bench.Match(events, r.fakes[c].Writes(t.id))
		all.Samples = append(all.Samples, m.Samples...)
		all.Missing += m.Missing
		all.Unmatched += m.Unmatched
		if m.Last.After(all.Last) {
			all.Last = m.Last
		}
	}
	return all, nil
}

func durations(ss []bench.Sample) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = s.Latency
	}
	return out
}

// cpu snapshots the CPU time of the worker, the dev server and this
// process (the karvi fakes and the comparison loops live here).
type cpuSnap struct {
	at                    time.Time
	worker, server, bench time.Duration
	db                    time.Duration // PostgreSQL's, with -cluster
}

func (r *rig) cpu() cpuSnap {
	s := cpuSnap{at: time.Now()}
	s.worker, _ = bench.CPUTime(r.worker.PID())
	s.server, _ = bench.CPUTime(r.e.serverPID)
	s.bench, _ = bench.CPUTime(os.Getpid())
	s.db = treeCPU(r.e.dbPID)
	return s
}

// CPUUse is cores used over an interval, per process.
type CPUUse struct {
	Seconds float64 `json:"seconds"`
	Worker  float64 `json:"workerCores"`
	Server  float64 `json:"serverCores"`
	Bench   float64 `json:"benchCores"`
	DB      float64 `json:"dbCores,omitempty"` // PostgreSQL, with -cluster
}

func cpuUse(a, b cpuSnap) CPUUse {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return CPUUse{}
	}
	return CPUUse{Seconds: wall,
		Worker: (b.worker - a.worker).Seconds() / wall,
		Server: (b.server - a.server).Seconds() / wall,
		Bench:  (b.bench - a.bench).Seconds() / wall,
		DB:     (b.db - a.db).Seconds() / wall}
}
