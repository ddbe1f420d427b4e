package main

import (
	"fmt"
	"strings"

	"karvi-edda-temporal/bench"
)

// Results is everything one benchrun measured; results.json holds it.
type Results struct {
	Started    string  `json:"started"`
	Seconds    float64 `json:"seconds"`
	LoadAtEnd  string  `json:"loadAvgAtEnd"`
	Quick      bool    `json:"quick"`
	Command    string  `json:"command"`
	WorkerArgs string  `json:"workerArgs,omitempty"`
	Tuned      string  `json:"tunedServerConfig"`
	// TunedServer: every scenario ran on the tuned dev server (-tuned-server).
	TunedServer bool               `json:"tunedServer,omitempty"`
	Machine     MachineInfo        `json:"machine"`
	GoBench     []GoBenchResult    `json:"goBench"`
	Canonical   []GoBenchResult    `json:"canonical"`
	Latency     []LatencyResult    `json:"latency"`
	Cost        []CostResult       `json:"cost"`
	Throughput  []ThroughputResult `json:"throughput"`
	Tasks       []TasksResult      `json:"tasks"`
	RSS         []RSSResult        `json:"rss"`
	Capacity    []CapacityLevel    `json:"capacity"`
	Runs        []RunBench         `json:"runs"`
	Slots       []SlotBench        `json:"slots"`
	Karvi       []KarviLimitResult `json:"karvi"`
	Traces      *TracesResult      `json:"traces,omitempty"`
	Cluster     string             `json:"cluster,omitempty"` // -cluster: the PostgreSQL-backed server's frontend
}

// GoBenchResult is one case of a one-core Go benchmark (a sub-benchmark of
// BenchmarkParseReduce, or BenchmarkValidateRedact).
type GoBenchResult struct {
	Name         string    `json:"name"`
	EventsPerSec float64   `json:"eventsPerSecMedian"`
	Runs         []float64 `json:"runs"`
}

// LatencyStats is one contender's event-to-PATCH latency.
type LatencyStats struct {
	Median bench.Summary   `json:"medianOfRuns"`
	Pooled bench.Summary   `json:"pooled"`
	PerRun []bench.Summary `json:"perRun"`
	// Missing: events that never reached this contender's karvi.
	Missing   int `json:"missing"`
	Unmatched int `json:"unmatched"`
}

// LatencyResult is one latency scenario.
type LatencyResult struct {
	Name        string                      `json:"name"`
	Server      string                      `json:"server"`
	Tasks       int                         `json:"tasks"`
	Runs        int                         `json:"runs"`
	Plan        string                      `json:"plan"`
	ByContender map[contender]*LatencyStats `json:"byContender"`
	// Ratios of this project's latency to the loops', medians over runs.
	P50RatioDirect float64           `json:"p50RatioDirect"`
	P99RatioDirect float64           `json:"p99RatioDirect"`
	P50RatioPoll   float64           `json:"p50RatioPoll"`
	CPU            CPUUse            `json:"cpu"`
	History        bench.HistoryCost `json:"historyPerTask"`
	// Stages splits this project's latency (up to 10 tasks per run).
	Stages bench.Stages `json:"stages"`
}

// CostResult is the history one kind of task leaves.
type CostResult struct {
	Name            string              `json:"name"`
	Plan            string              `json:"plan"`
	ConductorEvents int                 `json:"conductorEvents"`
	Median          bench.HistoryCost   `json:"median"`
	Runs            []bench.HistoryCost `json:"runs"`
}

// ThroughputResult is one offered load.
type ThroughputResult struct {
	Level           string  `json:"level"`
	Tasks           int     `json:"tasks"`
	EventsPerTask   int     `json:"eventsPerTask"`
	OfferedPerSec   int     `json:"offeredPerSec"`
	Events          int     `json:"events"`
	Missing         int     `json:"missing"`
	Seconds         float64 `json:"seconds"`
	DeliveredPerSec float64 `json:"deliveredPerSec"`
	// SustainedPerSec counts PATCHes received from 2 s after the first
	// event to the end of the 10 s window, while events were still coming.
	SustainedPerSec float64           `json:"sustainedPerSec"`
	Latency         bench.Summary     `json:"latency"`
	CPU             CPUUse            `json:"cpu"`
	HistoryPerTask  bench.HistoryCost `json:"historyPerTask"`
	Profile         string            `json:"profileTop,omitempty"`
}

// TasksRun is one round of short tasks.
type TasksRun struct {
	Seconds      float64       `json:"seconds"`
	PerMinute    float64       `json:"perMinute"`
	TaskDuration bench.Summary `json:"taskDuration"`
}

// TasksResult is tasks per minute end to end.
type TasksResult struct {
	Tasks     int        `json:"tasks"`
	Plan      string     `json:"plan"`
	PerMinute float64    `json:"perMinuteMedian"`
	PerRun    []TasksRun `json:"perRun"`
	CPU       CPUUse     `json:"cpu"`
}

// RSSResult is the worker's memory with n running tasks.
type RSSResult struct {
	Running    int     `json:"running"`
	RSSMB      float64 `json:"rssMBMedian"`
	MaxMB      float64 `json:"rssMBMax"`
	IdleCPU    CPUUse  `json:"idleCpu"`
	Goroutines int     `json:"goroutines"`
}

// Markdown renders the report printed at the end and saved as report.md.
func (r *Results) Markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	m := r.Machine
	p("# benchrun report (%s%s)", r.Started, map[bool]string{true: ", QUICK: smoke test only", false: ""}[r.Quick])
	p("")
	p("Command: `%s`%s. The tuned dev server adds: %s.", r.Command,
		map[bool]string{true: "; extra worker flags: " + r.WorkerArgs, false: ""}[r.WorkerArgs != ""], r.Tuned)
	p("")
	p("Machine: %s, %d cores, %d MB, kernel %s, %s, load average at start %s and at end %s, inotify max_user_instances %s. Took %.0fs.",
		m.CPU, m.Cores, m.MemoryMB, m.Kernel, m.Go, m.LoadAvg, r.LoadAtEnd, m.InotifyMx, r.Seconds)
	if len(r.GoBench) > 0 {
		p("")
		p("## Parse + reduce, one core (go test -bench ParseReduce -cpu 1)")
		p("")
		p("| case | events/s (median) | runs |")
		p("|---|---:|---|")
		for _, g := range r.GoBench {
			var runs []string
			for _, v := range g.Runs {
				runs = append(runs, fmt.Sprintf("%.0f", v))
			}
			p("| %s | %.0f | %s |", g.Name, g.EventsPerSec, strings.Join(runs, ", "))
		}
	}
	if len(r.Canonical) > 0 {
		p("")
		p("## Canonical events, one core (go test -bench ValidateRedact -cpu 1 ./canonical/): FromConductor, Validate, Redact; target 100,000/s")
		p("")
		p("| case | events/s (median) | runs |")
		p("|---|---:|---|")
		for _, g := range r.Canonical {
			var runs []string
			for _, v := range g.Runs {
				runs = append(runs, fmt.Sprintf("%.0f", v))
			}
			p("| %s | %.0f | %s |", g.Name, g.EventsPerSec, strings.Join(runs, ", "))
		}
	}
	for _, l := range r.Latency {
		p("")
		p("## Event-to-PATCH latency: %s (%d task(s) at once, %d runs, %s dev server)", l.Name, l.Tasks, l.Runs, l.Server)
		p("")
		p("Plan: %s. Milliseconds; median over runs of each run's percentile (pooled over all runs in brackets).", l.Plan)
		p("")
		p("| contender | events/run | p50 | p95 | p99 | max | missing |")
		p("|---|---:|---:|---:|---:|---:|---:|")
		for _, c := range []contender{directC, pollC, temporalC} {
			s := l.ByContender[c]
			if s == nil {
				continue
			}
			p("| %s | %d | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) | %d |", c, s.Median.N,
				s.Median.P50, s.Pooled.P50, s.Median.P95, s.Pooled.P95, s.Median.P99, s.Pooled.P99, s.Median.Max, s.Pooled.Max, s.Missing)
		}
		p("")
		p("Ratios (medians over runs): temporal/direct p50 %.2fx, p99 %.2fx; temporal/poll p50 %.2fx.",
			l.P50RatioDirect, l.P99RatioDirect, l.P50RatioPoll)
		p("CPU (cores, median over runs): worker %.2f, server %.2f, harness+fakes+loops %.2f. History per task: %d events, %d bytes.",
			l.CPU.Worker, l.CPU.Server, l.CPU.Bench, l.History.Events, l.History.Bytes)
		if n := l.ByContender[temporalC]; n != nil && n.Median.N > 0 {
			p("Server CPU per conductor event: %.2f ms; worker: %.2f ms.",
				l.CPU.Server*l.CPU.Seconds*1000/float64(n.Median.N), l.CPU.Worker*l.CPU.Seconds*1000/float64(n.Median.N))
		}
		st := l.Stages
		if st.Events == 0 {
			continue // the tail delivers: no event waits for the workflow
		}
		p("")
		p("Where this project's latency goes (%d events; %d written while no poll was running), ms p50 / p99:", st.Events, st.BetweenPolls)
		p("write -> tail activity completed %.1f / %.1f; -> workflow task started %.1f / %.1f; -> PATCH received %.1f / %.1f.",
			st.Tail.P50, st.Tail.P99, st.Dispatch.P50, st.Dispatch.P99, st.Patch.P50, st.Patch.P99)
	}
	if len(r.Cost) > 0 {
		p("")
		p("## Cost per task: Temporal history (medians; summed over continue-as-new runs)")
		p("")
		p("| plan | conductor events | history events | history bytes | runs | largest run (events / bytes) |")
		p("|---|---:|---:|---:|---:|---|")
		for _, c := range r.Cost {
			p("| %s | %d | %d | %d | %d | %d / %d |", c.Name, c.ConductorEvents, c.Median.Events, c.Median.Bytes,
				c.Median.Runs, c.Median.MaxRunEvents, c.Median.MaxRunBytes)
		}
	}
	if len(r.Throughput) > 0 {
		p("")
		p("## Throughput: one worker, each task's events spread over a 10 s phase")
		p("")
		p("Sustained: PATCHes received per second from 2 s after the first event to the end of the window; all-in: every event over first event to last PATCH.")
		p("")
		p("| level | tasks x events | offered ev/s | sustained ev/s | all-in ev/s | events | missing | p50 ms | p99 ms | max ms | worker cores | server cores | harness cores | server ms/event | history/task |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, t := range r.Throughput {
			perEvent := 0.0
			if t.Events > 0 {
				perEvent = t.CPU.Server * t.CPU.Seconds * 1000 / float64(t.Events)
			}
			p("| %s | %d x %d | %d | %.0f | %.0f | %d | %d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.3f | %d |", t.Level, t.Tasks, t.EventsPerTask, t.OfferedPerSec,
				t.SustainedPerSec, t.DeliveredPerSec, t.Events, t.Missing, t.Latency.P50, t.Latency.P99, t.Latency.Max,
				t.CPU.Worker, t.CPU.Server, t.CPU.Bench, perEvent, t.HistoryPerTask.Events)
		}
		for _, t := range r.Throughput {
			if t.Profile != "" {
				p("")
				p("Worker CPU profile, %s %d x %d (throughput-%s-%d-worker.pprof):", t.Level, t.Tasks, t.EventsPerTask, t.Level, t.OfferedPerSec)
				p("")
				p("```")
				lines := strings.Split(strings.TrimSpace(t.Profile), "\n")
				// Skip pprof's header lines; keep the top 20 functions.
				for len(lines) > 0 && !strings.Contains(lines[0], "flat%") {
					lines = lines[1:]
				}
				p("%s", strings.Join(lines[:min(len(lines), 21)], "\n"))
				p("```")
			}
		}
	}
	for _, t := range r.Tasks {
		p("")
		p("## Tasks per minute: %d short tasks at once (%s)", t.Tasks, t.Plan)
		p("")
		for i, run := range t.PerRun {
			p("- run %d: %.1fs, %.0f tasks/min, task duration p50 %.0f ms, p99 %.0f ms", i+1, run.Seconds, run.PerMinute,
				run.TaskDuration.P50, run.TaskDuration.P99)
		}
		p("- median: **%.0f tasks/min**; cores: worker %.2f, server %.2f, harness %.2f", t.PerMinute, t.CPU.Worker, t.CPU.Server, t.CPU.Bench)
	}
	if len(r.RSS) > 0 {
		p("")
		p("## Worker memory with running tasks (long-running plans: the agent hangs)")
		p("")
		p("| running tasks | VmRSS MB (median) | max | goroutines | idle worker cores | idle server cores |")
		p("|---:|---:|---:|---:|---:|---:|")
		for _, s := range r.RSS {
			p("| %d | %.1f | %.1f | %d | %.2f | %.2f |", s.Running, s.RSSMB, s.MaxMB, s.Goroutines, s.IdleCPU.Worker, s.IdleCPU.Server)
		}
	}
	if len(r.Capacity) > 0 {
		p("")
		if r.Cluster != "" {
			p("## Capacity: tasks at once on one worker, the PostgreSQL-backed cluster (%s) and the simulators", r.Cluster)
		} else {
			p("## Capacity: tasks at once on one worker, one dev server and the simulators (default dev server)")
		}
		p("")
		p("Each task: %s. Each level twice: its tasks started evenly over %s (spread), then all at once (burst). Stepped until p99 passes 1 s in both, a task fails, or the last level.", capacityPlan, capacitySpread)
		p("")
		p("\"first %s p99\" is the events written in a level's first %s, \"later p99\" the rest; \"slowest at\" when the slowest event was written, seconds into the level.", burstWindow, burstWindow)
		p("")
		p("| tasks | start | events | missing | p50 ms | p99 ms | max ms | first %s p99 ms | later p99 ms | slowest at s | worker cores | server cores | db cores | server ms/event | worker ms/event | error |", burstWindow)
		p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
		for _, c := range r.Capacity {
			p("| %d | %s | %d | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |", c.Tasks, c.Mode, c.Events, c.Missing,
				c.Latency.P50, c.Latency.P99, c.Latency.Max, c.Burst.P99, c.Rest.P99, c.SlowestAt,
				c.CPU.Worker, c.CPU.Server, c.CPU.DB, c.ServerMsPerEvent, c.WorkerMsPerEvent, c.Error)
		}
		p("")
		p("What a running task costs: the server's state transitions per task per minute (between phase boundaries: a %s window with none, on up to %d sampled tasks; overall: each sampled task's whole life), peak RSS, and the worker's open files and inotify watches at their peak.", capacityWindow, capacitySample)
		p("")
		p("| tasks | start | transitions/min between boundaries | tasks | overall | heartbeats/min | worker MB | worker KB/task | server MB | worker fds | inotify watches |")
		p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, c := range r.Capacity {
			p("| %d | %s | %.2f | %d | %.2f | %.2f | %.0f | %.0f | %.0f | %d | %d |", c.Tasks, c.Mode, c.Transitions.Between, c.Transitions.BetweenTasks,
				c.Transitions.Overall, c.Transitions.Heartbeats, c.WorkerMB, c.WorkerKBPerTask, c.ServerMB, c.WorkerFDs, c.InotifyWatches)
		}
	}
	if len(r.Runs) > 0 {
		p("")
		p("## A run of many dependent tasks (default dev server)")
		p("")
		p("Hand-off: from the last dependency's plan_completed to the dependent's plan_start, both as the conductor stamped them.")
		p("")
		p("| worker | tasks | levels x width | concurrency | status | seconds | hand-off p50 ms | p99 ms | max ms | run history events | KB | runs | largest run events | worker MB | server MB | worker KB/task | load | error |")
		p("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
		for _, x := range r.Runs {
			p("| %s | %d | %d x %d | %d | %s | %.0f | %.0f | %.0f | %.0f | %d | %d | %d | %d | %.0f | %.0f | %.0f | %s | %s |", x.Worker, x.Tasks, x.Tasks/x.Width, x.Width,
				x.Concurrency, x.Status, x.Seconds, x.Handoff.P50, x.Handoff.P99, x.Handoff.Max,
				x.History.Events, x.History.Bytes/1024, x.History.Runs, x.History.MaxRunEvents,
				x.WorkerMB, x.ServerMB, x.PerTaskKB, x.Load, x.Error)
		}
		p("")
		p("Hand-off stages, p50 / p99 ms (the last dependency's plan_completed -> its delivery completing -> its workflow closing -> the run learning of it -> the dependent's start initiated -> started -> its StartAttempt started -> plan_start):")
		p("")
		p("| worker | tasks | sees end | bookkeeping | to parent | parent task (wait + run) | child start | first task (wait + run + activity dispatch) | of which: claim wait / claim run / claim to StartAttempt started, p50 (p99) | plan+spawn |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.Runs {
			s := x.Stages
			p("| %s | %d | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f (%.0f + %.0f) | %.0f / %.0f | %.0f / %.0f (%.0f + %.0f + %.0f) | %.0f (%.0f) / %.0f (%.0f) / %.0f (%.0f) | %.0f / %.0f |", x.Worker, x.Tasks,
				s.SeesEnd.P50, s.SeesEnd.P99, s.Bookkeeping.P50, s.Bookkeeping.P99, s.ToParent.P50, s.ToParent.P99,
				s.ParentTask.P50, s.ParentTask.P99, s.ParentWait.P50, s.ParentRun.P50, s.ChildStart.P50, s.ChildStart.P99,
				s.FirstTask.P50, s.FirstTask.P99, s.FirstTaskWait.P50, s.FirstTaskRun.P50, s.ActivityWait.P50,
				s.ClaimWait.P50, s.ClaimWait.P99, s.ClaimRun.P50, s.ClaimRun.P99, s.AfterClaim.P50, s.AfterClaim.P99,
				s.PlanSpawn.P50, s.PlanSpawn.P99)
		}
	}
	if len(r.Slots) > 0 {
		p("")
		p("## An agent slot pool serving a long line (default dev server)")
		p("")
		p("Every slot held by a task that hangs until the line has formed, then freed. " +
			"Hand-off: from a release reaching the pool to the grant reaching the next waiter's workflow, as the server stamped both in history. " +
			"Acquire: the acquire call, answered at once. Wait: acquire to grant (mostly the line itself). Seconds: the line draining.")
		p("")
		p("| worker | tasks | max_concurrent | longest line | seconds | hand-off p50 ms | p99 ms | max ms | acquire p50 ms | p99 ms | wait p50 s | p99 s | pool history events | runs | worker MB | server MB | load | error |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
		for _, x := range r.Slots {
			p("| %s | %d | %d | %d | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %d | %.0f | %.0f | %s | %s |", x.Worker, x.Tasks, x.MaxConcurrent, x.PeakWaiters,
				x.Seconds, x.Handoff.P50, x.Handoff.P99, x.Handoff.Max, x.Acquire.P50, x.Acquire.P99, x.Wait.P50/1000, x.Wait.P99/1000,
				x.PoolHistory.Events, x.PoolHistory.Runs, x.WorkerMB, x.ServerMB, x.Load, x.Error)
		}
	}
	if len(r.Karvi) > 0 {
		p("")
		p("## karvi at its defaults: short tasks at once under karvi's rate limit (default dev server)")
		p("")
		p("Each task: 3 phases of 200 ms. Wall: first start to last end. Requests: all that reached the karvi fake, reads included. Refused: its 429 answers. Completed: the workflow and karvi's task both completed.")
		p("")
		p("| worker | karvi limit | tasks | wall s | requests | per task | 429 refused | completed | error |")
		p("|---|---|---:|---:|---:|---:|---:|---:|---|")
		for _, x := range r.Karvi {
			p("| %s | %s | %d | %.0f | %d | %.1f | %d | %d | %s |", x.Worker, x.KarviLimit, x.Tasks, x.Seconds, x.Requests, x.PerTask, x.Refused, x.Completed, x.Error)
		}
	}
	if x := r.Traces; x != nil {
		p("")
		p("## Tracing on vs off: event-to-brief latency, side by side (default dev server)")
		p("")
		p("Two workers at once, %d tasks each per run, %d runs; plan %s. Traced worker exports to %s.", x.Tasks, x.Runs, x.Plan, x.Backend)
		p("")
		p("| tracing | p50 ms (median of runs) | p95 | p99 | events | missing |")
		p("|---|---:|---:|---:|---:|---:|")
		for _, c := range []struct {
			name string
			s    *LatencyStats
		}{{"off", x.Off}, {"on", x.On}} {
			p("| %s | %.1f | %.1f | %.1f | %d | %d |", c.name, c.s.Median.P50, c.s.Median.P95, c.s.Median.P99, c.s.Pooled.N, c.s.Missing)
		}
		p("")
		p("On/off, median of runs: p50 %.2f, p99 %.2f.", x.P50Ratio, x.P99Ratio)
	}
	return b.String()
}
