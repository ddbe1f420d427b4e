package observe

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"karvi-edda-temporal/soak"
)

// TaskRef names a task to judge, and the run it belongs to ("" for none).
type TaskRef struct {
	ID  string
	Run string
}

// WorkerLog is one worker host's log file.
type WorkerLog struct {
	Host string
	Path string
}

// Sources are where Collect reads a soak's end state.
type Sources struct {
	// Roots are the worker hosts' work roots.
	Roots []Root
	// Board holds the tasks' statuses and briefs (FakeBoard, FileBoard);
	// nil reads none.
	Board Board
	// Workflows answers the final queries; nil asks none.
	Workflows Workflows
	// JournalPath and WebhooksPath are the driver's journal and the
	// webhook receiver's file ("" for none).
	JournalPath  string
	WebhooksPath string
	// WorkerLogs are read for the fences' stop lines.
	WorkerLogs []WorkerLog
	// Tasks and Runs name what the soak started; the journal, the run
	// directories and the runs' status.json add to them.
	Tasks []TaskRef
	Runs  []string
	// Samples is the Sampler's timeline.
	Samples []soak.Sample
	// Parallel bounds the tasks asked about at once (default 2).
	Parallel int
}

// Collect reads everything the final checks judge. It goes on past what
// it cannot read and returns what it found with every error joined: a
// soak reports a collector's trouble, it does not lose its other checks
// to it.
func Collect(ctx context.Context, src Sources, start, end time.Time) (soak.Observed, error) {
	o := soak.Observed{Start: start, End: end, Samples: src.Samples}
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if src.JournalPath != "" {
		j, err := ReadJournal(src.JournalPath)
		note(err)
		o.Journal = j
	}
	if src.WebhooksPath != "" {
		w, err := ReadWebhooks(src.WebhooksPath)
		note(err)
		o.Webhooks = w
	}
	for _, l := range src.WorkerLogs {
		fs, err := ReadFenceStops(l.Path, l.Host)
		note(err)
		o.FenceStops = append(o.FenceStops, fs...)
	}
	sort.SliceStable(o.FenceStops, func(i, j int) bool { return o.FenceStops[i].At.Before(o.FenceStops[j].At) })

	runOf := map[string]string{}
	add := func(id, run string) {
		if id == "" {
			return
		}
		if _, ok := runOf[id]; !ok || runOf[id] == "" {
			runOf[id] = run
		}
	}
	for _, t := range src.Tasks {
		add(t.ID, t.Run)
	}
	for _, r := range o.Journal {
		add(r.Task, r.Run)
	}
	runStatus := map[string]map[string]*soak.RunTaskStatus{}
	for _, slug := range src.Runs {
		st, err := ReadRunStatus(src.Roots, slug)
		note(err)
		runStatus[slug] = st
		for id := range st {
			add(id, slug)
		}
	}
	runs, err := Runs(src.Roots...)
	note(err)
	for _, r := range runs {
		add(r.Task, "")
	}
	for _, s := range o.Samples {
		for _, t := range s.Tasks {
			add(t.Task, "")
		}
	}
	ids := make([]string, 0, len(runOf))
	for id := range runOf {
		ids = append(ids, id)
	}
	sort.Strings(ids)

	o.Tasks = make([]soak.TaskObs, len(ids))
	taskErrs := make([]error, len(ids))
	par := src.Parallel
	if par <= 0 {
		par = 2
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o.Tasks[i], taskErrs[i] = collectTask(ctx, src, id, runOf[id], runStatus[runOf[id]])
		}()
	}
	wg.Wait()
	errs = append(errs, taskErrs...)
	return o, errors.Join(errs...)
}

// collectTask reads one task's end state.
func collectTask(ctx context.Context, src Sources, id, run string, runStatus map[string]*soak.RunTaskStatus) (soak.TaskObs, error) {
	t := soak.TaskObs{ID: id, Run: run}
	var errs []error
	if run != "" && runStatus != nil {
		t.RunStatus = runStatus[id]
	}
	if src.Board != nil {
		bt, br, err := src.Board.Task(id)
		if err != nil {
			errs = append(errs, err)
		}
		t.Board, t.Brief = bt, br
	}
	var cwds map[string]string
	if src.Workflows != nil {
		wo, jo, c, err := src.Workflows.Final(ctx, id)
		if err != nil {
			errs = append(errs, err)
		}
		t.Workflow, t.Job, cwds = wo, jo, c
	}
	plans, err := ReadPlans(src.Roots, id, cwds)
	if err != nil {
		errs = append(errs, err)
	}
	t.Plans = plans
	if err := errors.Join(errs...); err != nil {
		return t, fmt.Errorf("task %s: %w", id, err)
	}
	return t, nil
}
