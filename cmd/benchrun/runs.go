package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/karvifake"
)

// RunBench is one run of many dependent tasks through the run workflow.
type RunBench struct {
	// Worker is the build that ran it: "now", or "before" (the worker of
	// BENCH_RUNS_BEFORE_BIN, run alternately with this one).
	Worker      string  `json:"worker"`
	Tasks       int     `json:"tasks"`
	Width       int     `json:"width"`
	Concurrency int     `json:"concurrency"`
	Plan        string  `json:"plan"`
	Seconds     float64 `json:"seconds"`
	// Handoff is, per task with dependencies, the time from the last of
	// its dependencies' plan completing (the conductor's plan_completed) to
	// its own conductor starting (plan_start): the run workflow's share of
	// the critical path.
	Handoff bench.Summary `json:"handoff"`
	// Stages splits the hand-off at the histories' stamps.
	Stages HandoffStages `json:"stages"`
	// History is the run workflow's, over its continue-as-new chain (the
	// task workflows' histories are their own).
	History bench.HistoryCost `json:"history"`
	// WorkerMB and ServerMB are the peak RSS of the worker and the dev
	// server over the run; PerTaskKB is the worker's peak over its idle
	// RSS, per task running at once (the run's concurrency).
	WorkerMB  float64 `json:"workerMB"`
	ServerMB  float64 `json:"serverMB"`
	PerTaskKB float64 `json:"perTaskKB"`
	Load      string  `json:"load"`
	Status    string  `json:"status"`
	Error     string  `json:"error,omitempty"`
	// StatusWrites are the run's status.json writes (the WriteRunStatus
	// local activity, from the worker's metrics): how many, and their mean
	// and total time on the worker; StatusKB is the file's final size.
	StatusWrites  int     `json:"statusWrites"`
	StatusWriteMS float64 `json:"statusWriteMs"`
	StatusWriteS  float64 `json:"statusWriteSeconds"`
	StatusKB      float64 `json:"statusKB"`
	// ViewMS and ViewKB are the run view (starter run status) once the run
	// ended, asked for in ViewPages pages: the pages' round trips and
	// their answers' size together.
	ViewMS    float64 `json:"viewMs"`
	ViewKB    float64 `json:"viewKB"`
	ViewPages int     `json:"viewPages"`
	ViewError *string `json:"viewError,omitempty"`
}

// runPlan: one phase of 100 ms per task, so the figures are the
// orchestration's, not the agents'.
const runPlan = "[sim checks=pass delay=100ms cost=0.01]"

// runs measures a 500-task run: 20 levels of 25 tasks, each task waiting
// for two of the level before it, with room for a whole level at once, so a
// dependent never waits for a slot, only for the hand-off. With
// BENCH_RUNS_BEFORE_BIN set (a directory holding an older worker), the
// older worker and this one take turns, BENCH_RUNS_REPS times each
// (default 2), on the same server, so their figures are side by side.
func (e *env) runs(ctx context.Context) error {
	n, width := 500, 25
	if e.quick {
		n = 50
	}
	// BENCH_RUNS_TASKS and BENCH_RUNS_WIDTH size the run (the concurrency
	// is twice the width, at most runplan.MaxConcurrency).
	if v, err := strconv.Atoi(os.Getenv("BENCH_RUNS_TASKS")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("BENCH_RUNS_WIDTH")); err == nil && v > 0 {
		width = v
	}
	reps := 1
	if v, err := strconv.Atoi(os.Getenv("BENCH_RUNS_REPS")); err == nil && v > 0 {
		reps = v
	}
	builds := []rigOptions{{}}
	if dir := os.Getenv("BENCH_RUNS_BEFORE_BIN"); dir != "" {
		builds = []rigOptions{{binDir: dir}, {}}
		if os.Getenv("BENCH_RUNS_REPS") == "" {
			reps = 2
		}
	}
	for rep := range reps {
		for _, b := range builds {
			if err := e.oneRun(ctx, fmt.Sprintf("r%d", rep), n, width, min(2*width, runplan.MaxConcurrency), b); err != nil {
				return err
			}
		}
	}
	return nil
}

// oneRun runs n tasks in levels of width, each depending on two of the
// level before, at the given concurrency, and records its figures.
func (e *env) oneRun(ctx context.Context, prefix string, n, width, concurrency int, o rigOptions) error {
	worker := "now"
	if o.binDir != "" {
		worker = "before"
	}
	o.fakeLimit = karvifake.RateLimitOff
	port, err := devenv.FreePort()
	if err != nil {
		return err
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", port)
	o.args = append([]string{"-karvi-rate-limit", "off", "-metrics-addr", metrics}, o.args...)
	r, err := e.newRigWith("runs-"+prefix+"-"+worker, o)
	if err != nil {
		return err
	}
	defer r.close()
	r.metrics = metrics
	time.Sleep(2 * time.Second) // the worker's pollers start
	idle, _ := bench.RSS(r.worker.PID())
	var tasks []string
	for i := range n {
		id := fmt.Sprintf("%s-t%05d", prefix+worker[:1], i)
		if err := r.fakes[temporalC].AddTask(karvifake.Task{ID: id, Status: "pending", BriefPath: true, Brief: json.RawMessage(`{}`)}); err != nil {
			return err
		}
		deps := ""
		if lvl := i / width; lvl > 0 {
			prev := (lvl - 1) * width
			deps = fmt.Sprintf(`,"depends":["%s-t%05d","%s-t%05d"]`, prefix+worker[:1], prev+i%width, prefix+worker[:1], prev+(i+1)%width)
		}
		tasks = append(tasks, fmt.Sprintf(`{"id":%q,"title":"Task %d","description":%q,"skill":"single"%s}`, id, i, runPlan, deps))
	}
	data := fmt.Sprintf(`{"slug":"bench-run-%s%s","title":"Bench run","concurrency":%d,"tasks":[%s]}`, prefix, worker, concurrency, strings.Join(tasks, ","))
	run, err := runplan.Parse([]byte(data))
	if err != nil {
		return err
	}
	res := RunBench{Worker: worker, Tasks: n, Width: width, Concurrency: run.Concurrency, Plan: runPlan, Load: loadAvg()}
	rss := sampleRSS([]int{r.worker.PID(), e.serverPID}, 500*time.Millisecond)
	started := time.Now()
	wr, err := runapi.Runs{Client: e.cl, TaskQueue: r.queue}.Start(ctx, runapi.RunInput{Run: json.RawMessage(data)}, runapi.StartOptions{})
	if err != nil {
		rss.stop()
		return fmt.Errorf("start run: %w", err)
	}
	firstRun := wr.GetRunID()
	// BENCH_RUNS_TIMEOUT (a Go duration) bounds the wait for the run's
	// end; a 10,000-task run on 2 cores needs more than the default.
	wait := 30 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("BENCH_RUNS_TIMEOUT")); err == nil && d > 0 {
		wait = d
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var doc runstatus.Status
	if err := wr.Get(wctx, &doc); err != nil {
		res.Error = firstLine(err.Error())
	}
	res.Seconds = time.Since(started).Seconds()
	rss.stop()
	res.WorkerMB, res.ServerMB = rss.of(r.worker.PID()), rss.of(e.serverPID)
	if res.WorkerMB > 0 && idle > 0 {
		res.PerTaskKB = (res.WorkerMB - mb(idle)) * 1024 / float64(run.Concurrency)
	}
	res.Status = string(doc.Status)
	r.statusFigures(ctx, &res, wr.GetID())
	if res.History, err = bench.History(ctx, e.cl, wr.GetID(), firstRun); err != nil {
		return err
	}
	if res.Error == "" {
		spans, err := r.spans(run)
		if err != nil {
			return err
		}
		res.Handoff = bench.Summarize(handoffsOf(run, spans))
		if res.Stages, err = traceHandoffs(ctx, e.cl, run, wr.GetID(), firstRun, spans); err != nil {
			return err
		}
	}
	e.results.Runs = append(e.results.Runs, res)
	st := res.Stages
	e.logf("run of %d tasks (%s worker): %s in %.0fs; hand-off p50/p99/max %.0f/%.0f/%.0f ms; stages p50 (p99) ms: "+
		"sees end %.0f (%.0f), bookkeeping %.0f (%.0f), to parent %.0f (%.0f), parent task %.0f (%.0f), child start %.0f (%.0f), first task %.0f (%.0f), plan+spawn %.0f (%.0f); "+
		"run history %d events, %d KB in %d runs; RSS worker %.0f MB, server %.0f MB; "+
		"status.json %d writes, mean %.1f ms, %.1f s in all, %.0f KB at the end; view %.0f ms, %.0f KB in %d pages; %s",
		n, worker, res.Status, res.Seconds, res.Handoff.P50, res.Handoff.P99, res.Handoff.Max,
		st.SeesEnd.P50, st.SeesEnd.P99, st.Bookkeeping.P50, st.Bookkeeping.P99, st.ToParent.P50, st.ToParent.P99,
		st.ParentTask.P50, st.ParentTask.P99, st.ChildStart.P50, st.ChildStart.P99, st.FirstTask.P50, st.FirstTask.P99,
		st.PlanSpawn.P50, st.PlanSpawn.P99,
		res.History.Events, res.History.Bytes/1024, res.History.Runs, res.WorkerMB, res.ServerMB,
		res.StatusWrites, res.StatusWriteMS, res.StatusWriteS, res.StatusKB, res.ViewMS, res.ViewKB, res.ViewPages, res.Error)
	return nil
}

// statusFigures fills in what the run's status.json writes cost the
// worker, the file's size, and what the run view query costs once the run
// ended. A figure that cannot be had stays zero.
func (r *rig) statusFigures(ctx context.Context, res *RunBench, workflowID string) {
	if n, sum, ok := r.histogram("local_activity_execution_latency", `activity_type="WriteRunStatus"`); ok && n > 0 {
		res.StatusWrites, res.StatusWriteS, res.StatusWriteMS = int(n), sum, sum/n*1000
	}
	var doc string
	if entries, err := os.ReadDir(filepath.Join(r.workRoot, "prds")); err == nil && len(entries) == 1 {
		doc = filepath.Join(r.workRoot, "prds", entries[0].Name(), "status.json")
	}
	if fi, err := os.Stat(doc); err == nil {
		res.StatusKB = float64(fi.Size()) / 1024
	}
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	started := time.Now()
	bytes := 0
	_, err := runapi.FetchView(func(p runapi.ViewPage) (runapi.View, error) {
		res.ViewPages++
		var raw json.RawMessage
		if err := (runapi.Runs{Client: r.e.cl}).Query(qctx, runapi.SlugOf(workflowID), runapi.QueryView, &raw, p); err != nil {
			return runapi.View{}, err
		}
		bytes += len(raw)
		var page runapi.View
		return page, json.Unmarshal(raw, &page)
	})
	if err != nil {
		e := firstLine(err.Error())
		res.ViewError = &e
		return
	}
	res.ViewMS = float64(time.Since(started).Microseconds()) / 1000
	res.ViewKB = float64(bytes) / 1024
}

type span struct{ start, end time.Time }

// spans reads each task's conductor events for when its plan started and
// completed.
func (r *rig) spans(run runplan.Run) (map[string]span, error) {
	spans := map[string]span{}
	for _, t := range run.Tasks {
		d := run.Dispatch(t.ID, nil)
		cwd, err := r.layout.TaskCwd(d)
		if err != nil {
			return nil, err
		}
		events, err := bench.ReadEvents(filepath.Join(cwd, ".edda", "conductor", firstPlan(r.workRoot, t.ID), "events.jsonl"))
		if err != nil {
			return nil, err
		}
		var s span
		for _, ev := range events {
			switch ev.Type {
			case "plan_start":
				s.start = ev.At
			case "plan_completed":
				s.end = ev.At
			}
		}
		if s.start.IsZero() || s.end.IsZero() {
			return nil, fmt.Errorf("task %s: no plan_start or plan_completed in its events", t.ID)
		}
		spans[t.ID] = s
	}
	return spans, nil
}

// handoffsOf returns, per task with dependencies, its start minus the last
// completion among them.
func handoffsOf(run runplan.Run, spans map[string]span) []time.Duration {
	var out []time.Duration
	for _, t := range run.Tasks {
		if len(t.Depends) == 0 {
			continue
		}
		var last time.Time
		for _, d := range t.Depends {
			if end := spans[d].end; end.After(last) {
				last = end
			}
		}
		out = append(out, spans[t.ID].start.Sub(last))
	}
	return out
}

// firstPlan is the plan name of a task's first attempt under the work
// root: its name carries the task workflow's nonce, so it is looked up.
func firstPlan(root, taskID string) string {
	entries, _ := os.ReadDir(filepath.Join(root, "runs", taskID))
	for _, e := range entries {
		if e.IsDir() && mapping.IsAttemptPlan(e.Name(), taskID, 1) {
			return e.Name()
		}
	}
	return mapping.PlanName(taskID, 1)
}
