package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/jaeger"
	"karvi-edda-temporal/testkit/karvifake"
)

// tracesPlan writes tool calls into every transcript, so a traced phase
// makes a dozen spans where the delivery takes its checkpoint.
const tracesPlan = "[sim checks=pass delay=1s events=10 tools=10] " + exampleACosts

// TracesResult is event-to-brief latency with tracing off and on, side by
// side: two workers on the same server at the same time, one exporting
// every task's trace.
type TracesResult struct {
	Plan    string        `json:"plan"`
	Backend string        `json:"backend"`
	Tasks   int           `json:"tasksPerRunPerSide"`
	Runs    int           `json:"runs"`
	Off     *LatencyStats `json:"off"`
	On      *LatencyStats `json:"on"`
	// Ratios of on to off, medians over runs.
	P50Ratio float64 `json:"p50Ratio"`
	P99Ratio float64 `json:"p99Ratio"`
}

// tracesScenario measures what tracing costs delivery: the same plan on
// two rigs at once, one worker with tracing off, the other exporting to a
// Jaeger (bin/jaeger, when built) or else to an OTLP/HTTP receiver that
// takes and drops everything.
func (e *env) tracesScenario(ctx context.Context) error {
	backend, env, stop, err := e.traceBackend(ctx)
	if err != nil {
		return err
	}
	defer stop()
	off, err := e.newRig("traces-off")
	if err != nil {
		return err
	}
	defer off.close()
	on, err := e.newRigWith("traces-on", rigOptions{fakeLimit: karvifake.RateLimitOff,
		args: []string{"-karvi-rate-limit", "off"}, env: env})
	if err != nil {
		return err
	}
	defer on.close()
	n, runs := e.pick(5, 2), e.pick(4, 2)
	res := TracesResult{Plan: "sequential (3 phases) " + tracesPlan, Backend: backend, Tasks: n, Runs: runs,
		Off: &LatencyStats{}, On: &LatencyStats{}}
	var pooledOff, pooledOn []time.Duration
	var r50, r99 []float64
	for run := 1; run <= runs; run++ {
		var offTasks, onTasks []*task
		for i := range n {
			a, err := off.newTask(fmt.Sprintf("traces-off-r%d-t%d", run, i), "sequential", tracesPlan, nil)
			if err != nil {
				return err
			}
			b, err := on.newTask(fmt.Sprintf("traces-on-r%d-t%d", run, i), "sequential", tracesPlan, nil)
			if err != nil {
				return err
			}
			offTasks, onTasks = append(offTasks, a), append(onTasks, b)
		}
		var wg sync.WaitGroup
		var errOff, errOn error
		wg.Add(2)
		go func() { defer wg.Done(); errOff = off.run(ctx, offTasks, runOptions{wait: true}) }()
		go func() { defer wg.Done(); errOn = on.run(ctx, onTasks, runOptions{wait: true}) }()
		wg.Wait()
		if errOff != nil || errOn != nil {
			return fmt.Errorf("off: %v; on: %v", errOff, errOn)
		}
		mOff, err := off.latencies(offTasks, temporalC)
		if err != nil {
			return err
		}
		mOn, err := on.latencies(onTasks, temporalC)
		if err != nil {
			return err
		}
		sOff, sOn := bench.Summarize(durations(mOff.Samples)), bench.Summarize(durations(mOn.Samples))
		res.Off.PerRun, res.On.PerRun = append(res.Off.PerRun, sOff), append(res.On.PerRun, sOn)
		res.Off.Missing += mOff.Missing
		res.On.Missing += mOn.Missing
		pooledOff, pooledOn = append(pooledOff, durations(mOff.Samples)...), append(pooledOn, durations(mOn.Samples)...)
		r50, r99 = append(r50, ratio(sOn.P50, sOff.P50)), append(r99, ratio(sOn.P99, sOff.P99))
		e.logf("traces run %d: off p50/p99 %.1f/%.1f ms, on %.1f/%.1f (%d/%d events)", run,
			sOff.P50, sOff.P99, sOn.P50, sOn.P99, sOff.N, sOn.N)
	}
	res.Off.Median, res.On.Median = bench.MedianSummary(res.Off.PerRun), bench.MedianSummary(res.On.PerRun)
	res.Off.Pooled, res.On.Pooled = bench.Summarize(pooledOff), bench.Summarize(pooledOn)
	res.P50Ratio, res.P99Ratio = bench.Median(r50), bench.Median(r99)
	e.results.Traces = &res
	return nil
}

// traceBackend starts where the traced worker exports: a Jaeger when
// bin/jaeger is built, else a receiver that drops what it gets.
func (e *env) traceBackend(ctx context.Context) (string, []string, func(), error) {
	if _, err := devenv.Binary("jaeger"); err == nil {
		j, err := jaeger.Start(ctx, filepath.Join(e.out, "jaeger.log"))
		if err != nil {
			return "", nil, nil, err
		}
		return "Jaeger (bin/jaeger, in-memory store)", j.Env("karvi-bench"), j.Stop, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(l) }()
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + l.Addr().String(), "OTEL_SERVICE_NAME=karvi-bench"}
	return "an OTLP/HTTP receiver that drops everything (bin/jaeger not built)", env, func() { _ = srv.Close() }, nil
}
