package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/soak"
)

// summary is what the last line reports.
type summary struct {
	tasks, runs, kills, violations int
}

// run is the whole soak: start, play, drain, check, stop, report.
func run(ctx context.Context, cfg config) (sum summary, err error) {
	mix := soak.NewMix(cfg.seed, cfg.duration, cfg.scale)
	started := time.Now()
	s, err := startStack(ctx, cfg)
	if err != nil {
		if s != nil {
			s.close()
		}
		return sum, err
	}
	if err := writeJSON(filepath.Join(cfg.out, "mix.json"), mix); err != nil {
		s.close()
		return sum, err
	}
	d := newDriver(s, mix)
	chk := newChecker(d)
	d.watch = chk.Watch
	cctx, stopChecking := context.WithCancel(ctx)
	defer stopChecking()
	chk.Start(cctx)
	d.t0 = time.Now()
	pctx, stopProgress := context.WithCancel(ctx)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		d.progress(pctx, chk)
	}()
	// The last line printed must be the summary.
	defer func() {
		stopProgress()
		<-progressDone
	}()
	d.logf("mix: %d steps %v", len(mix.Steps), mix.Counts())

	sctx, stopSupervising := context.WithCancel(ctx)
	go s.supervise(sctx)
	d.play(ctx)
	d.logf("mix played in %s; draining", time.Since(d.t0).Round(time.Second))
	drained := d.drain(ctx)
	var vs []soak.Violation
	// The final queries replay closed workflows on the workers: they run
	// (and are started again if one exits) until the checks are done.
	vs = append(vs, chk.Final(ctx)...)
	stopSupervising()
	s.close()
	vs = append(vs, chk.Leftovers(context.Background())...)
	soak.SortViolations(vs)

	sum = summary{tasks: d.startedTasks(), runs: d.startedRuns(), kills: s.kills, violations: len(vs)}
	rep := report{Seed: cfg.seed, Duration: cfg.duration.String(), Scale: cfg.scale, Out: cfg.out,
		Wall: time.Since(started).Round(time.Second).String(), Drained: drained,
		Mix: mix.Counts(), Tasks: sum.tasks, Runs: sum.runs, Kills: sum.kills,
		FailedSteps: d.failed, Problems: chk.problems, Violations: vs}
	if err := rep.write(cfg.out); err != nil {
		return sum, err
	}
	if ctx.Err() != nil {
		return sum, errors.New("interrupted")
	}
	return sum, nil
}

// progress prints a line a minute, so a person watching a long soak sees
// it move: what started, what the machine went through, what the live
// checks found so far (driver.log names each).
func (d *driver) progress(ctx context.Context, chk *soakChecker) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
		}
		started := 0
		for _, id := range d.order {
			select {
			case <-d.tasks[id].started:
				started++
			default:
			}
		}
		d.mu.Lock()
		failed := d.failed
		d.mu.Unlock()
		d.stack.mu.Lock()
		kills := d.kills
		d.stack.mu.Unlock()
		fmt.Printf("soak %s: %d of %d tasks started, %d kills, %d steps refused, %d violations so far\n",
			time.Since(d.t0).Round(time.Second), started, len(d.order), kills, failed, chk.liveViolations())
	}
}

// drain waits for every workflow the soak started, and every board task
// the intake took, to end, bounded: a loaded machine is slow, so the bound
// is generous, and a task still open at the end is a violation the checks
// report, never a hang. It reports whether everything ended.
func (d *driver) drain(ctx context.Context) bool {
	bound := max(5*time.Minute, d.cfg.duration/2)
	deadline := time.Now().Add(bound)
	quiet := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		open := d.openWork(ctx)
		if len(open) == 0 {
			// Twice in a row, a few seconds apart: the intake may start
			// a send-back's new workflow just after the last one closed.
			if quiet++; quiet >= 2 {
				d.logf("drained: every workflow ended")
				return true
			}
		} else {
			quiet = 0
			d.logf("draining: %d open: %s", len(open), strings.Join(open[:min(len(open), 12)], " "))
		}
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
	}
	d.logf("drain: gave up after %s", bound)
	return false
}

// openWork lists what is still running: task and run workflows, and
// board tasks the intake has not yet taken.
func (d *driver) openWork(ctx context.Context) []string {
	var open []string
	for _, slug := range d.runs {
		if st, _ := d.workflowStatus(ctx, runapi.WorkflowID(slug)); st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			open = append(open, "run:"+slug)
		}
	}
	for _, id := range d.order {
		t := d.tasks[id]
		st, _ := d.workflowStatus(ctx, taskapi.WorkflowID(id))
		switch {
		case st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			open = append(open, id)
		case d.onBoard(t):
			// Not yet taken, or sent back and not yet taken again: the
			// board says the task is to run and no workflow runs it.
			if kt, ok := d.karvi.Task(id); ok && (kt.Status == "dispatched" || kt.Status == "in_progress") {
				open = append(open, id+"(board)")
			}
		}
	}
	return open
}

// workflowStatus is the status of the latest workflow of an id, and
// whether there is one. An error reading it counts as running: the
// server may be restarting.
func (d *driver) workflowStatus(ctx context.Context, id string) (enumspb.WorkflowExecutionStatus, bool) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	desc, err := d.cl.DescribeWorkflowExecution(cctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, false
	}
	if err != nil {
		return enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, true
	}
	return desc.GetWorkflowExecutionInfo().GetStatus(), true
}

// startedTasks counts the tasks that got a workflow; startedRuns the runs.
func (d *driver) startedTasks() int {
	n := 0
	ctx := context.Background()
	for _, id := range d.order {
		if _, found := d.workflowStatusCached(ctx, taskapi.WorkflowID(id)); found {
			n++
		}
	}
	return n
}

func (d *driver) startedRuns() int {
	n := 0
	for _, slug := range d.runs {
		if _, found := d.workflowStatusCached(context.Background(), runapi.WorkflowID(slug)); found {
			n++
		}
	}
	return n
}

// workflowStatusCached answers from the end's record of each workflow
// (the server is stopped by then).
func (d *driver) workflowStatusCached(_ context.Context, id string) (enumspb.WorkflowExecutionStatus, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.ended[id]
	return st, ok
}

// report is report.json; report.md says the same for a person.
type report struct {
	Seed        int64          `json:"seed"`
	Duration    string         `json:"duration"`
	Scale       float64        `json:"scale"`
	Out         string         `json:"out"`
	Wall        string         `json:"wall"`
	Drained     bool           `json:"drained"`
	Mix         map[string]int `json:"mix"`
	Tasks       int            `json:"tasks"`
	Runs        int            `json:"runs"`
	Kills       int            `json:"kills"`
	FailedSteps int            `json:"failedSteps"`
	// Problems are what the checks could not read (a query that timed
	// out, a file missing): they weaken the checks, they are not
	// violations.
	Problems   []string         `json:"problems,omitempty"`
	Violations []soak.Violation `json:"violations"`
}

func (r report) write(dir string) error {
	if err := writeJSON(filepath.Join(dir, "report.json"), r); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Soak seed %d\n\n", r.Seed)
	fmt.Fprintf(&b, "Mix of %s at scale %g (a minute of the runtime's periods lasted %s), %s of wall time; replay with `make soak SOAK_SEED=%d SOAK_DURATION=%s SOAK_SCALE=%g`.\n\n",
		r.Duration, r.Scale, time.Duration(float64(time.Minute)/r.Scale).Round(time.Millisecond), r.Wall, r.Seed, r.Duration, r.Scale)
	fmt.Fprintf(&b, "%d tasks, %d runs, %d worker kills; %d steps the system refused or could not take (driver.log); every workflow ended: %v.\n\n",
		r.Tasks, r.Runs, r.Kills, r.FailedSteps, r.Drained)
	b.WriteString("## The mix, by kind\n\n| kind | count |\n|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(r.Mix)) {
		fmt.Fprintf(&b, "| %s | %d |\n", k, r.Mix[k])
	}
	if len(r.Problems) > 0 {
		b.WriteString("\n## What the checks could not read\n\n")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	fmt.Fprintf(&b, "\n## Violations: %d\n\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "- %s\n", v)
	}
	b.WriteString("\nFiles: mix.json (every step), observed.json (what the checks judged), journal.jsonl (what the driver did), webhooks.jsonl, driver.log, temporal.log, h1/ and h2/ (each host's worker.log and work root).\n")
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
