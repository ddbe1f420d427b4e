package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/testkit/devenv"
)

// CapacityLevel is one step of the capacity curve: n tasks running at
// once on one worker, one dev server and the simulators, all on this
// machine.
type CapacityLevel struct {
	Tasks   int           `json:"tasks"`
	Events  int           `json:"events"`
	Missing int           `json:"missing"`
	Latency bench.Summary `json:"latency"`
	CPU     CPUUse        `json:"cpu"`
	// ServerMsPerEvent is the dev server's CPU time per conductor event.
	ServerMsPerEvent float64 `json:"serverMsPerEvent"`
	// WorkerMsPerEvent is the worker's.
	WorkerMsPerEvent float64 `json:"workerMsPerEvent"`
	// Burst is the latency of the events written in the level's first
	// burstWindow (every task starting at once), Rest of those written
	// later; SlowestAt is when the slowest event was written, in seconds
	// after the level started. They tell a start-up tail from a steady one.
	Burst     bench.Summary `json:"burst"`
	Rest      bench.Summary `json:"rest"`
	SlowestAt float64       `json:"slowestAtS"`
	Error     string        `json:"error,omitempty"`
	// Mode is how the level's tasks started: burst (all at once) or
	// spread (evenly over capacitySpread).
	Mode string `json:"mode"`
	// Transitions is the server's state transitions per running task per
	// minute: Between over a window with no phase boundary in it (the
	// cost of a task while its agent works), Overall over each sampled
	// task's whole life (start, boundaries and end included).
	Transitions Transitions `json:"transitions"`
	// WorkerMB and ServerMB are the peak RSS of the worker and the dev
	// server during the level; WorkerKBPerTask the worker's growth over
	// its RSS before the level, per task.
	WorkerMB        float64 `json:"workerMB"`
	ServerMB        float64 `json:"serverMB"`
	WorkerKBPerTask float64 `json:"workerKBPerTask"`
	// WorkerFDs and InotifyWatches are the worker's open files and
	// inotify watches at their peak in the level.
	WorkerFDs      int `json:"workerFDs"`
	InotifyWatches int `json:"inotifyWatches"`
}

// Transitions are state transitions per running task per minute, and how
// many tasks each figure is the mean of.
type Transitions struct {
	// Heartbeats is the worker's heartbeat calls per running task per
	// minute over the same window (a heartbeat is a write on the server
	// that the transition count leaves out).
	Heartbeats    float64 `json:"heartbeats"`
	Between       float64 `json:"between"`
	BetweenTasks  int     `json:"betweenTasks"`
	Overall       float64 `json:"overall"`
	OverallTasks  int     `json:"overallTasks"`
	WindowSeconds float64 `json:"windowS"`
}

// burstWindow is the start of a level: the workflow starts, the process
// spawns and the first phase's first events.
const burstWindow = 10 * time.Second

// splitBurst summarises the samples written before start+burstWindow and
// those written after, and says when (seconds after start) the slowest one
// was written.
func splitBurst(ss []bench.Sample, start time.Time) (burst, rest bench.Summary, slowestAt float64) {
	var b, r []time.Duration
	var slowest time.Duration
	for _, s := range ss {
		if s.At.Before(start.Add(burstWindow)) {
			b = append(b, s.Latency)
		} else {
			r = append(r, s.Latency)
		}
		if s.Latency > slowest {
			slowest, slowestAt = s.Latency, s.At.Sub(start).Seconds()
		}
	}
	return bench.Summarize(b), bench.Summarize(r), slowestAt
}

// capacityPlan: 3 phases of 40 s, each with 7 progress events, 26 events
// per task over about two minutes: agents that work for a while and write
// as they go. Most of a task's life is then between phase boundaries,
// where a running task should cost the server almost nothing.
const capacityPlan = "[sim checks=pass delay=40s events=7] " + exampleACosts

// capacitySpread is how long the spread mode takes to start a level.
const capacitySpread = time.Minute

// capacityWindow is how long the transitions between phase boundaries are
// counted, and capacitySample how many tasks they are counted on.
const (
	capacityWindow = 20 * time.Second
	capacitySample = 200
)

// capacity steps the number of concurrent tasks, each level once with its
// tasks started evenly over a minute and once all at once, until
// event-to-PATCH p99 passes 1 s in both, a task fails, or the last level
// ran.
func (e *env) capacity(ctx context.Context) error {
	levels := []int{500, 1000, 2000, 3000}
	if e.quick {
		levels = []int{20, 50}
	}
	if len(e.capacityLevels) > 0 {
		levels = e.capacityLevels
	}
	port, err := devenv.FreePort()
	if err != nil {
		return err
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", port)
	r, err := e.newRig("capacity", "-metrics-addr", metrics)
	if err != nil {
		return err
	}
	defer r.close()
	r.metrics = metrics
	// The worker's RSS before any task: once it serves pprof it has
	// connected, and a few seconds later its pollers run.
	for deadline := time.Now().Add(time.Minute); goroutines(r.pprof) == 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("worker pprof endpoint %s never answered", r.pprof)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	for _, n := range levels {
		failed := 0
		modes := []string{"spread", "burst"}
		if m := os.Getenv("BENCH_CAPACITY_MODES"); m != "" {
			modes = strings.Split(m, ",")
		}
		for _, mode := range modes {
			lv, err := e.capacityLevel(ctx, r, n, mode)
			if err != nil {
				return err
			}
			e.results.Capacity = append(e.results.Capacity, lv)
			if lv.Error != "" {
				return nil
			}
			if lv.Latency.P99 > 1000 {
				failed++
			}
		}
		// Levels given with -capacity-levels all run (to compare servers
		// level by level) unless a task fails.
		if failed == 2 && len(e.capacityLevels) == 0 {
			break
		}
	}
	return nil
}

func (e *env) capacityLevel(ctx context.Context, r *rig, n int, mode string) (CapacityLevel, error) {
	var tasks []*task
	for i := range n {
		t, err := r.newTask(fmt.Sprintf("cap%d-%s-t%d", n, mode, i), "sequential", capacityPlan, nil)
		if err != nil {
			return CapacityLevel{}, err
		}
		tasks = append(tasks, t)
	}
	var spread time.Duration
	if mode == "spread" {
		spread = capacitySpread
	}
	idle, err := bench.RSS(r.worker.PID())
	if err != nil {
		return CapacityLevel{}, err
	}
	rss := sampleRSS([]int{r.worker.PID(), e.serverPID}, time.Second)
	before := r.cpu()
	start := before.at
	// The workflows run while the level's figures are sampled: its
	// transitions between boundaries once every task started, its open
	// files through the level.
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, tasks, runOptions{wait: true, timeout: 20 * time.Minute, spread: spread}) }()
	files := sampleFiles(r.worker.PID(), 2*time.Second)
	between, err := r.transitionsBetween(ctx, tasks, spread)
	if err != nil {
		e.logf("capacity %d %s: transitions between boundaries not measured: %v", n, mode, err)
	}
	runErr := <-done
	files.stop()
	rss.stop()
	use := cpuUse(before, r.cpu())
	m, err := r.latencies(tasks, temporalC)
	if err != nil {
		return CapacityLevel{}, err
	}
	lv := CapacityLevel{Tasks: n, Mode: mode, Events: len(m.Samples), Missing: m.Missing,
		Latency: bench.Summarize(durations(m.Samples)), CPU: use,
		WorkerMB: rss.of(r.worker.PID()), ServerMB: rss.of(e.serverPID),
		WorkerFDs: files.fds, InotifyWatches: files.watches, Transitions: between}
	lv.WorkerKBPerTask = (lv.WorkerMB - mb(idle)) * 1024 / float64(n)
	lv.Transitions.Overall, lv.Transitions.OverallTasks = r.transitionsOverall(ctx, sampleOf(tasks, capacitySample))
	lv.Burst, lv.Rest, lv.SlowestAt = splitBurst(m.Samples, start)
	if ev := len(m.Samples) + m.Missing; ev > 0 {
		lv.ServerMsPerEvent = use.Server * use.Seconds * 1000 / float64(ev)
		lv.WorkerMsPerEvent = use.Worker * use.Seconds * 1000 / float64(ev)
	}
	if runErr != nil {
		lv.Error = firstLine(runErr.Error())
	}
	if lv.Latency.Max > 1000 {
		for _, s := range r.slowest(ctx, tasks, r.dir, 5) {
			e.logf("capacity %d %s: slow: %s", n, mode, s)
		}
	}
	e.logf("capacity %d tasks %s: p50/p99/max %.0f/%.0f/%.0f ms over %d events (%d missing); first %s p99 %.0f ms, later p99 %.0f ms, slowest written at %.1f s; "+
		"transitions/task/min between boundaries %.2f (%d tasks), overall %.2f, heartbeats/task/min %.2f; cores worker %.2f server %.2f; RSS worker %.0f MB (%.0f KB/task) server %.0f MB; worker fds %d, inotify watches %d; %s",
		n, mode, lv.Latency.P50, lv.Latency.P99, lv.Latency.Max, lv.Events, lv.Missing, burstWindow, lv.Burst.P99,
		lv.Rest.P99, lv.SlowestAt, lv.Transitions.Between, lv.Transitions.BetweenTasks, lv.Transitions.Overall, lv.Transitions.Heartbeats,
		use.Worker, use.Server, lv.WorkerMB, lv.WorkerKBPerTask, lv.ServerMB, lv.WorkerFDs, lv.InotifyWatches, lv.Error)
	return lv, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
