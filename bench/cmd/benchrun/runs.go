package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/internal/karvifake"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/runapi"
)

// RunBench is one run of many dependent tasks through the run workflow.
type RunBench struct {
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
	// History is the run workflow's, over its continue-as-new chain (the
	// task workflows' histories are their own).
	History bench.HistoryCost `json:"history"`
	Status  string            `json:"status"`
	Error   string            `json:"error,omitempty"`
}

// runPlan: one phase of 100 ms per task, so the figures are the
// orchestration's, not the agents'.
const runPlan = "[sim checks=pass delay=100ms cost=0.01]"

// runs measures a 500-task run: 20 levels of 25 tasks, each task waiting
// for two of the level before it, with room for a whole level at once, so a
// dependent never waits for a slot, only for the hand-off.
func (e *env) runs(ctx context.Context) error {
	n, width := 500, 25
	if e.quick {
		n = 50
	}
	r, err := e.newRig("runs")
	if err != nil {
		return err
	}
	defer r.close()
	var tasks []string
	for i := range n {
		id := fmt.Sprintf("run-t%03d", i)
		if err := r.fakes[temporalC].AddTask(karvifake.Task{ID: id, Status: "pending", BriefPath: true, Brief: json.RawMessage(`{}`)}); err != nil {
			return err
		}
		deps := ""
		if lvl := i / width; lvl > 0 {
			prev := (lvl - 1) * width
			deps = fmt.Sprintf(`,"depends":["run-t%03d","run-t%03d"]`, prev+i%width, prev+(i+1)%width)
		}
		tasks = append(tasks, fmt.Sprintf(`{"id":%q,"title":"Task %d","description":%q,"skill":"single"%s}`, id, i, runPlan, deps))
	}
	data := fmt.Sprintf(`{"slug":"bench-run","title":"Bench run","concurrency":%d,"tasks":[%s]}`, 2*width, strings.Join(tasks, ","))
	run, err := runplan.Parse([]byte(data))
	if err != nil {
		return err
	}
	res := RunBench{Tasks: n, Width: width, Concurrency: run.Concurrency, Plan: runPlan}
	started := time.Now()
	wr, err := e.cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: runapi.WorkflowID(run.Slug), TaskQueue: r.queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}, runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(data)})
	if err != nil {
		return fmt.Errorf("start run: %w", err)
	}
	firstRun := wr.GetRunID()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	var doc runstatus.Status
	if err := wr.Get(wctx, &doc); err != nil {
		res.Error = firstLine(err.Error())
	}
	res.Seconds = time.Since(started).Seconds()
	res.Status = string(doc.Status)
	if res.History, err = bench.History(ctx, e.cl, wr.GetID(), firstRun); err != nil {
		return err
	}
	if res.Error == "" {
		handoffs, err := r.handoffs(run)
		if err != nil {
			return err
		}
		res.Handoff = bench.Summarize(handoffs)
	}
	e.results.Runs = append(e.results.Runs, res)
	e.logf("run of %d tasks: %s in %.0fs; hand-off p50/p99/max %.0f/%.0f/%.0f ms; run history %d events, %d KB in %d runs; %s",
		n, res.Status, res.Seconds, res.Handoff.P50, res.Handoff.P99, res.Handoff.Max,
		res.History.Events, res.History.Bytes/1024, res.History.Runs, res.Error)
	return nil
}

// handoffs reads each task's conductor events for when its plan started
// and completed, and returns, per task with dependencies, its start minus
// the last completion among them.
func (r *rig) handoffs(run runplan.Run) ([]time.Duration, error) {
	type span struct{ start, end time.Time }
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
	return out, nil
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
