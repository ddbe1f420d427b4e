package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"karvi-edda-temporal/bench"
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

// capacityPlan: 3 phases of 6 s with 2 progress events each, 14 events
// per task over about 18 s, as agents that think between steps.
const capacityPlan = "[sim checks=pass delay=6s events=2] " + exampleACosts

// capacity steps the number of concurrent tasks until event-to-PATCH p99
// passes 1 s, a task fails, or the last level ran.
func (e *env) capacity(ctx context.Context) error {
	levels := []int{100, 250, 500, 1000, 1500}
	if e.quick {
		levels = []int{20, 50}
	}
	if len(e.capacityLevels) > 0 {
		levels = e.capacityLevels
	}
	r, err := e.newRig("capacity")
	if err != nil {
		return err
	}
	defer r.close()
	for _, n := range levels {
		var tasks []*task
		for i := range n {
			t, err := r.newTask(fmt.Sprintf("cap%d-t%d", n, i), "sequential", capacityPlan, nil)
			if err != nil {
				return err
			}
			tasks = append(tasks, t)
		}
		before := r.cpu()
		start := before.at
		runErr := r.run(ctx, tasks, runOptions{wait: true, timeout: 15 * time.Minute})
		use := cpuUse(before, r.cpu())
		m, err := r.latencies(tasks, temporalC)
		if err != nil {
			return err
		}
		lv := CapacityLevel{Tasks: n, Events: len(m.Samples), Missing: m.Missing,
			Latency: bench.Summarize(durations(m.Samples)), CPU: use}
		lv.Burst, lv.Rest, lv.SlowestAt = splitBurst(m.Samples, start)
		if ev := len(m.Samples) + m.Missing; ev > 0 {
			lv.ServerMsPerEvent = use.Server * use.Seconds * 1000 / float64(ev)
			lv.WorkerMsPerEvent = use.Worker * use.Seconds * 1000 / float64(ev)
		}
		if runErr != nil {
			lv.Error = firstLine(runErr.Error())
		}
		e.results.Capacity = append(e.results.Capacity, lv)
		e.logf("capacity %d tasks: p50/p99/max %.0f/%.0f/%.0f ms over %d events (%d missing); first %s p99 %.0f ms (%d events), later p99 %.0f ms, slowest written at %.1f s; cores worker %.2f server %.2f db %.2f; %s",
			n, lv.Latency.P50, lv.Latency.P99, lv.Latency.Max, lv.Events, lv.Missing, burstWindow, lv.Burst.P99, lv.Burst.N,
			lv.Rest.P99, lv.SlowestAt, use.Worker, use.Server, use.DB, lv.Error)
		// Levels given with -capacity-levels all run (to compare servers
		// level by level) unless a task fails.
		if runErr != nil || (lv.Latency.P99 > 1000 && len(e.capacityLevels) == 0) {
			break
		}
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
