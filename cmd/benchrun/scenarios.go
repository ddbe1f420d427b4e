package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/bench"
)

// exampleACosts makes the simulator report example A's costs per phase.
const exampleACosts = "[sim phase=implement cost=0.85] [sim phase=test cost=0.42] [sim phase=docs cost=0.18]"

func (e *env) pick(full, quick int) int {
	if e.quick {
		return quick
	}
	return full
}

// latencyScenario runs `runs` rounds of n tasks at once, with the two
// comparison loops following the same events.jsonl files.
func (e *env) latencyScenario(ctx context.Context, name string, n, runs int, directives string) error {
	r, err := e.newRig(name)
	if err != nil {
		return err
	}
	defer r.close()
	server := "default"
	if e.serverTuned {
		server = "tuned"
	}
	res := LatencyResult{Name: name, Server: server, Tasks: n, Runs: runs, Plan: "sequential (3 phases) " + directives,
		ByContender: map[contender]*LatencyStats{}}
	for _, c := range []contender{temporalC, directC, pollC} {
		res.ByContender[c] = &LatencyStats{}
	}
	var pooled = map[contender][]time.Duration{}
	var ratios50, ratios99, ratiosPoll []float64
	var cpus []CPUUse
	var hist []bench.HistoryCost
	var stages bench.StageSamples
	for run := 1; run <= runs; run++ {
		var tasks []*task
		for i := range n {
			t, err := r.newTask(fmt.Sprintf("%s-r%d-t%d", name, run, i), "sequential", directives, nil)
			if err != nil {
				return err
			}
			tasks = append(tasks, t)
		}
		before := r.cpu()
		if err := r.run(ctx, tasks, runOptions{sideBySide: true, wait: true}); err != nil {
			return err
		}
		cpus = append(cpus, cpuUse(before, r.cpu()))
		sums := map[contender]bench.Summary{}
		for _, c := range []contender{temporalC, directC, pollC} {
			m, err := r.latencies(tasks, c)
			if err != nil {
				return err
			}
			s := bench.Summarize(durations(m.Samples))
			sums[c] = s
			st := res.ByContender[c]
			st.PerRun = append(st.PerRun, s)
			st.Missing += m.Missing
			st.Unmatched += m.Unmatched
			pooled[c] = append(pooled[c], durations(m.Samples)...)
		}
		ratios50 = append(ratios50, ratio(sums[temporalC].P50, sums[directC].P50))
		ratios99 = append(ratios99, ratio(sums[temporalC].P99, sums[directC].P99))
		ratiosPoll = append(ratiosPoll, ratio(sums[temporalC].P50, sums[pollC].P50))
		for _, t := range tasks[:min(len(tasks), 10)] {
			h, err := bench.History(ctx, e.cl, taskapi.WorkflowID(t.id), t.runID)
			if err != nil {
				return err
			}
			hist = append(hist, h)
			m, err := r.latencies([]*task{t}, temporalC)
			if err != nil {
				return err
			}
			s, err := bench.Breakdown(ctx, e.cl, taskapi.WorkflowID(t.id), t.runID, m.Samples)
			if err != nil {
				return err
			}
			stages.Add(s)
			if t == tasks[0] {
				tr, err := bench.Trace(ctx, e.cl, taskapi.WorkflowID(t.id), t.runID, m.Samples)
				if err != nil {
					return err
				}
				path := filepath.Join(e.out, fmt.Sprintf("trace-%s-r%d.txt", name, run))
				if err := os.WriteFile(path, []byte(strings.Join(tr, "\n")+"\n"), 0o644); err != nil {
					return err
				}
			}
		}
		e.logf("%s run %d: temporal p50/p99 %.1f/%.1f ms, direct %.1f/%.1f, poll %.1f/%.1f (%d events)",
			name, run, sums[temporalC].P50, sums[temporalC].P99, sums[directC].P50, sums[directC].P99,
			sums[pollC].P50, sums[pollC].P99, sums[temporalC].N)
	}
	for c, st := range res.ByContender {
		st.Median = bench.MedianSummary(st.PerRun)
		st.Pooled = bench.Summarize(pooled[c])
	}
	res.P50RatioDirect = bench.Median(ratios50)
	res.P99RatioDirect = bench.Median(ratios99)
	res.P50RatioPoll = bench.Median(ratiosPoll)
	res.CPU = medianCPU(cpus)
	res.History = medianHistory(hist)
	res.Stages = stages.Stages()
	e.results.Latency = append(e.results.Latency, res)
	return nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// The 1-task plan writes an event about every 95 ms for 6 s (68 events);
// the 100-task plan 14 events per task over about 9 s (3 phases of 3 s, 2
// progress events each), about 150 events/s in all once every task runs.
const (
	latency1Plan   = "[sim checks=pass delay=2s events=20] " + exampleACosts
	latency100Plan = "[sim checks=pass delay=3s events=2] " + exampleACosts
)

func (e *env) latency1(ctx context.Context) error {
	return e.latencyScenario(ctx, "latency1", 1, e.pick(5, 2), latency1Plan)
}

func (e *env) latency100(ctx context.Context) error {
	return e.latencyScenario(ctx, "latency100", e.pick(100, 20), e.pick(3, 1), latency100Plan)
}

// tunedLatency repeats both latency scenarios on the tuned dev server.
func (e *env) tunedLatency(ctx context.Context) error {
	if err := e.latencyScenario(ctx, "latency1-tuned", 1, e.pick(5, 2), latency1Plan); err != nil {
		return err
	}
	return e.latencyScenario(ctx, "latency100-tuned", e.pick(100, 20), e.pick(3, 1), latency100Plan)
}

// cost measures history per task: example A's 3-phase run (each event
// on its own, as with real agents) and 1,000-event plans, spread out (many
// batches), in one burst, and with continue-as-new every 20 polls.
func (e *env) cost(ctx context.Context) error {
	r, err := e.newRig("cost")
	if err != nil {
		return err
	}
	defer r.close()
	type variant struct {
		name, skill, directives string
		tuning                  *taskapi.Tuning
		parallel                bool
	}
	variants := []variant{
		{"example A, 3 phases", "sequential", "[sim checks=pass delay=1s] " + exampleACosts, nil, false},
		{"1,000 events over 20s", "single", "[sim checks=pass events=1000 delay=20s]", nil, true},
		{"1,000 events in one burst", "single", "[sim checks=pass events=1000 delay=100ms]", nil, true},
		{"1,000 events over 20s, continue-as-new every 20 polls", "single", "[sim checks=pass events=1000 delay=20s]",
			&taskapi.Tuning{ContinueAsNewAfterPolls: 20}, true},
	}
	runs := e.pick(3, 1)
	var all []*task
	byVariant := map[string][]*task{}
	// Example A runs alone (its batching is the point); the
	// 1,000-event plans run together to keep the scenario short.
	for vi, v := range variants {
		for k := range runs {
			t, err := r.newTask(fmt.Sprintf("cost-v%d-r%d", vi, k), v.skill, v.directives, v.tuning)
			if err != nil {
				return err
			}
			byVariant[v.name] = append(byVariant[v.name], t)
			if !v.parallel {
				if err := r.run(ctx, []*task{t}, runOptions{wait: true}); err != nil {
					return err
				}
			} else {
				all = append(all, t)
			}
		}
	}
	if err := r.run(ctx, all, runOptions{wait: true}); err != nil {
		return err
	}
	for _, v := range variants {
		var hs []bench.HistoryCost
		var events []float64
		for _, t := range byVariant[v.name] {
			h, err := bench.History(ctx, e.cl, taskapi.WorkflowID(t.id), t.runID)
			if err != nil {
				return err
			}
			hs = append(hs, h)
			events = append(events, float64(t.result.Brief.CompletedPhases))
			evs, err := bench.ReadEvents(t.eventsPath)
			if err != nil {
				return err
			}
			events[len(events)-1] = float64(len(evs))
		}
		res := CostResult{Name: v.name, Plan: v.skill + " " + v.directives, Runs: hs, Median: medianHistory(hs),
			ConductorEvents: int(bench.Median(events))}
		e.results.Cost = append(e.results.Cost, res)
		e.logf("cost %s: %d history events, %d bytes over %d runs (%d conductor events)",
			v.name, res.Median.Events, res.Median.Bytes, res.Median.Runs, res.ConductorEvents)
	}
	return nil
}

// throughput offers one worker events from many tasks at once, spread over
// a 10 s phase, and measures what it delivers: events PATCHed per second
// from the first event written to the last PATCH received, and the latency
// at that load. "wide" levels have many tasks with short logs (the server's
// dispatch is the work); "deep" ones few tasks whose 1,000 events fill the
// brief's log, so every PATCH carries 500 entries. The worker is profiled
// during each level.
func (e *env) throughput(ctx context.Context) error {
	window := 10 * time.Second
	type level struct {
		name          string
		tasks, events int
	}
	levels := []level{{"wide", 25, 100}, {"wide", 50, 100}, {"wide", 50, 200}, {"deep", 4, 1000}}
	if e.quick {
		levels = []level{{"wide", 10, 50}, {"deep", 2, 500}}
	}
	for _, lv := range levels {
		rate := lv.tasks * lv.events / int(window/time.Second)
		name := fmt.Sprintf("throughput-%s-%d", lv.name, rate)
		r, err := e.newRig(name)
		if err != nil {
			return err
		}
		var tasks []*task
		for i := range lv.tasks {
			t, err := r.newTask(fmt.Sprintf("tp-%s%d-t%d", lv.name, rate, i), "single",
				fmt.Sprintf("[sim checks=pass events=%d delay=%s]", lv.events, window), nil)
			if err != nil {
				r.close()
				return err
			}
			tasks = append(tasks, t)
		}
		prof := r.profile(ctx, 2*time.Second, 6*time.Second, filepath.Join(e.out, name+"-worker.pprof"))
		before := r.cpu()
		err = r.run(ctx, tasks, runOptions{wait: true, timeout: 10 * time.Minute})
		cpu := cpuUse(before, r.cpu())
		if err != nil {
			r.close()
			return err
		}
		m, err := r.latencies(tasks, temporalC)
		if err != nil {
			r.close()
			return err
		}
		first := time.Time{}
		for _, s := range m.Samples {
			if first.IsZero() || s.At.Before(first) {
				first = s.At
			}
		}
		tr := ThroughputResult{Level: lv.name, Tasks: lv.tasks, EventsPerTask: lv.events, OfferedPerSec: rate,
			Events: len(m.Samples), Missing: m.Missing, Seconds: m.Last.Sub(first).Seconds(),
			Latency: bench.Summarize(durations(m.Samples)), CPU: cpu}
		if tr.Seconds > 0 {
			tr.DeliveredPerSec = float64(tr.Events) / tr.Seconds
		}
		// Sustained: PATCHes received while the conductors were still
		// writing, past the start-up burst (2 s in, to the window's end).
		from, to := first.Add(2*time.Second), first.Add(window)
		n := 0
		for _, s := range m.Samples {
			if at := s.At.Add(s.Latency); !at.Before(from) && at.Before(to) {
				n++
			}
		}
		tr.SustainedPerSec = float64(n) / to.Sub(from).Seconds()
		var hs []bench.HistoryCost
		for _, t := range tasks[:min(len(tasks), 5)] {
			if h, err := bench.History(ctx, e.cl, taskapi.WorkflowID(t.id), t.runID); err == nil {
				hs = append(hs, h)
			}
		}
		tr.HistoryPerTask = medianHistory(hs)
		tr.Profile, err = prof.wait()
		if err != nil {
			e.logf("worker profile: %v", err)
		}
		e.results.Throughput = append(e.results.Throughput, tr)
		e.logf("throughput %s %d tasks x %d events (%d/s offered): sustained %.0f events/s, all in %.0f/s, p50/p99 %.0f/%.0f ms, cores worker %.2f server %.2f harness %.2f",
			lv.name, lv.tasks, lv.events, rate, tr.SustainedPerSec, tr.DeliveredPerSec, tr.Latency.P50, tr.Latency.P99, cpu.Worker, cpu.Server, cpu.Bench)
		r.close()
	}
	return nil
}

// tasksPerMinute starts many short tasks (example A with 50 ms
// phases) at once and times them to the last completion.
func (e *env) tasksPerMinute(ctx context.Context) error {
	n := e.pick(100, 20)
	runs := e.pick(3, 1)
	r, err := e.newRig("tasks")
	if err != nil {
		return err
	}
	defer r.close()
	res := TasksResult{Tasks: n, Plan: "sequential [sim checks=pass delay=50ms] + example A costs"}
	var rates []float64
	var cpus []CPUUse
	for run := 1; run <= runs; run++ {
		var tasks []*task
		for i := range n {
			t, err := r.newTask(fmt.Sprintf("tpm-r%d-t%d", run, i), "sequential", "[sim checks=pass delay=50ms] "+exampleACosts, nil)
			if err != nil {
				return err
			}
			tasks = append(tasks, t)
		}
		before := r.cpu()
		t0 := time.Now()
		if err := r.run(ctx, tasks, runOptions{wait: true}); err != nil {
			return err
		}
		var last time.Time
		var durs []time.Duration
		for _, t := range tasks {
			if t.ended.After(last) {
				last = t.ended
			}
			durs = append(durs, t.ended.Sub(t.started))
		}
		cpus = append(cpus, cpuUse(before, r.cpu()))
		span := last.Sub(t0)
		rate := float64(n) / span.Minutes()
		rates = append(rates, rate)
		res.PerRun = append(res.PerRun, TasksRun{Seconds: span.Seconds(), PerMinute: rate, TaskDuration: bench.Summarize(durs)})
		e.logf("tasks run %d: %d tasks in %s = %.0f tasks/min", run, n, span.Round(time.Millisecond), rate)
	}
	res.PerMinute = bench.Median(rates)
	res.CPU = medianCPU(cpus)
	e.results.Tasks = append(e.results.Tasks, res)
	return nil
}

// rss starts long-running tasks (an agent that hangs) in steps and reads
// the worker's VmRSS once all of them are running.
func (e *env) rss(ctx context.Context) error {
	steps := []int{1, 100, 500}
	if e.quick {
		steps = []int{1, 20}
	}
	r, err := e.newRig("rss")
	if err != nil {
		return err
	}
	defer r.close()
	var all []*task
	defer func() {
		// Terminate what is left so the server does not keep polling.
		tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for _, t := range all {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				_ = e.cl.TerminateWorkflow(tctx, taskapi.WorkflowID(t.id), "", "benchmark over")
			}()
		}
		wg.Wait()
	}()
	// Idle baseline: once the worker serves pprof it has connected, and a
	// few seconds later its pollers are running.
	for deadline := time.Now().Add(time.Minute); goroutines(r.pprof) == 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("worker pprof endpoint %s never answered", r.pprof)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	base, err := bench.RSS(r.worker.PID())
	if err != nil {
		return err
	}
	e.results.RSS = append(e.results.RSS, RSSResult{Running: 0, RSSMB: mb(base), MaxMB: mb(base), Goroutines: goroutines(r.pprof)})
	for _, n := range steps {
		var batch []*task
		for i := len(all); i < n; i++ {
			t, err := r.newTask(fmt.Sprintf("rss-t%d", i), "single", "[sim checks=pass hang]", nil)
			if err != nil {
				return err
			}
			batch = append(batch, t)
		}
		all = append(all, batch...)
		if err := r.run(ctx, batch, runOptions{}); err != nil {
			return err
		}
		// Running means the conductor's phase_start reached karvi: the
		// task is in_progress and its tail is long-polling.
		deadline := time.Now().Add(5 * time.Minute)
		for {
			running := 0
			for _, t := range all {
				if kt, ok := r.fakes[temporalC].Task(t.id); ok && kt.Status == "in_progress" {
					running++
				}
			}
			if running == len(all) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("only %d of %d tasks running after 5 minutes", running, len(all))
			}
			time.Sleep(500 * time.Millisecond)
		}
		// Let the start-up burst settle, then sample for a while.
		time.Sleep(3 * time.Second)
		before := r.cpu()
		var samples []float64
		for range 10 {
			v, err := bench.RSS(r.worker.PID())
			if err != nil {
				return err
			}
			samples = append(samples, mb(v))
			time.Sleep(time.Second)
		}
		cpu := cpuUse(before, r.cpu())
		sort.Float64s(samples)
		res := RSSResult{Running: n, RSSMB: bench.Median(samples), MaxMB: samples[len(samples)-1], IdleCPU: cpu,
			Goroutines: goroutines(r.pprof)}
		e.results.RSS = append(e.results.RSS, res)
		e.logf("rss with %d running tasks: %.1f MB (max %.1f), idle cores worker %.2f server %.2f",
			n, res.RSSMB, res.MaxMB, cpu.Worker, cpu.Server)
	}
	return nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// goroutines reads the worker's goroutine count from its pprof endpoint.
func goroutines(addr string) int {
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	line, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	var n int
	fmt.Sscanf(string(line), "goroutine profile: total %d", &n)
	return n
}

type profileJob struct {
	done chan struct{}
	top  string
	err  error
}

// profile takes a CPU profile of the worker after a delay, in the
// background, and summarises it with `go tool pprof -top`.
func (r *rig) profile(ctx context.Context, after, length time.Duration, path string) *profileJob {
	j := &profileJob{done: make(chan struct{})}
	go func() {
		defer close(j.done)
		select {
		case <-ctx.Done():
			j.err = ctx.Err()
			return
		case <-time.After(after):
		}
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", r.pprof, int(length/time.Second))
		resp, err := http.Get(url)
		if err != nil {
			j.err = err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			j.err = err
			return
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			f.Close()
			j.err = err
			return
		}
		f.Close()
		out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=30", r.e.worker, path).CombinedOutput()
		if err != nil {
			j.err = fmt.Errorf("go tool pprof: %w: %s", err, out)
			return
		}
		j.top = string(out)
		_ = os.WriteFile(strings.TrimSuffix(path, ".pprof")+".top.txt", out, 0o644)
		cum, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=40", r.e.worker, path).CombinedOutput()
		if err == nil {
			_ = os.WriteFile(strings.TrimSuffix(path, ".pprof")+".cum.txt", cum, 0o644)
		}
	}()
	return j
}

func (j *profileJob) wait() (string, error) {
	<-j.done
	return j.top, j.err
}

func medianCPU(cs []CPUUse) CPUUse {
	f := func(g func(CPUUse) float64) float64 {
		v := make([]float64, len(cs))
		for i, c := range cs {
			v[i] = g(c)
		}
		return bench.Median(v)
	}
	return CPUUse{
		Seconds: f(func(c CPUUse) float64 { return c.Seconds }),
		Worker:  f(func(c CPUUse) float64 { return c.Worker }),
		Server:  f(func(c CPUUse) float64 { return c.Server }),
		Bench:   f(func(c CPUUse) float64 { return c.Bench }),
	}
}

func medianHistory(hs []bench.HistoryCost) bench.HistoryCost {
	f := func(g func(bench.HistoryCost) int) int {
		v := make([]float64, len(hs))
		for i, h := range hs {
			v[i] = float64(g(h))
		}
		return int(bench.Median(v))
	}
	return bench.HistoryCost{
		Runs:         f(func(h bench.HistoryCost) int { return h.Runs }),
		Events:       f(func(h bench.HistoryCost) int { return h.Events }),
		Bytes:        f(func(h bench.HistoryCost) int { return h.Bytes }),
		MaxRunEvents: f(func(h bench.HistoryCost) int { return h.MaxRunEvents }),
		MaxRunBytes:  f(func(h bench.HistoryCost) int { return h.MaxRunBytes }),
	}
}
