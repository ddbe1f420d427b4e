package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
)

// startRun starts the run workflow of a run file. The file is checked here
// first, so a bad one is refused before anything reaches Temporal.
func startRun(ctx context.Context, cl client.Client, taskQueue, file string, o runStartOpts, stdin io.Reader, stdout io.Writer) error {
	data, err := readInput(file, stdin)
	if err != nil {
		return fmt.Errorf("read run file: %w", err)
	}
	r, err := runplan.Parse(data)
	if err != nil {
		return err
	}
	budget, err := budgetOf(o.budgetOpts)
	if err != nil {
		return err
	}
	scale, err := timeScale()
	if err != nil {
		return err
	}
	in := runapi.RunInput{Run: json.RawMessage(data), Repo: o.repo, FeatureBranch: o.featureBranch,
		Budget: budget, Pool: o.pool, Tuning: taskapi.WithScale(nil, scale)}
	id := runapi.WorkflowID(r.Slug)
	run, err := runapi.Runs{Client: cl, TaskQueue: taskQueue}.Start(ctx, in, runapi.StartOptions{})
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return fmt.Errorf("run %s is already running (%s, run %s)", r.Slug, id, started.RunId)
		}
		return fmt.Errorf("start workflow %s: %w", id, err)
	}
	fmt.Fprintf(stdout, "started %s run %s: %d tasks, concurrency %d\n", id, run.GetRunID(), len(r.Tasks), r.Concurrency)
	if o.follow {
		return runStatus(ctx, temporalRuns{cl}, r.Slug, stdout, runStatusOptionsFor(stdout, runStatusOpts{follow: true}))
	}
	if !o.wait {
		return nil
	}
	if err := run.Get(ctx, nil); err != nil {
		return fmt.Errorf("run %s: %w", r.Slug, err)
	}
	return runStatus(ctx, temporalRuns{cl}, r.Slug, stdout, runStatusOptionsFor(stdout, runStatusOpts{}))
}

// updateRun sends one of the run's updates and waits for its answer: a
// refusal comes back with the run's reason.
func updateRun(ctx context.Context, cl client.Client, slug, name string, arg any, stdout io.Writer) error {
	id := runapi.WorkflowID(slug)
	if err := (runapi.Runs{Client: cl}).Update(ctx, slug, name, arg); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return fmt.Errorf("run %s has no running workflow (%s): nothing to %s", slug, id, name)
		}
		return fmt.Errorf("run %s: %s: %w", slug, name, err)
	}
	fmt.Fprintf(stdout, "run %s: %s done\n", slug, name)
	return nil
}

// retryOrSkip sends retry or skip to a run; when the run has already ended
// (partial: what kept it from completing is exactly what a person retries or
// skips), it is reopened from where it ended with the request applied first.
// The request is checked against the ended run first, so a refusal starts
// nothing.
func retryOrSkip(ctx context.Context, cl client.Client, slug, name string, req runapi.TaskRequest, stdout io.Writer) error {
	runs := runapi.Runs{Client: cl}
	desc, err := runs.Describe(ctx, slug)
	if err != nil {
		return runError(slug, "describe", err)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return updateRun(ctx, cl, slug, name, req, stdout)
	}
	var in runapi.RunInput
	if err := runs.Query(ctx, slug, runapi.QueryHandover, &in); err != nil {
		return runError(slug, "read where it ended", err)
	}
	// The handover comes packed: read it plain, start from it as it came.
	plain, err := in.Unpack()
	if err != nil {
		return fmt.Errorf("run %s: handover: %w", slug, err)
	}
	if err := checkReopen(plain, name, req); err != nil {
		return fmt.Errorf("run %s has ended and cannot be reopened: %w", slug, err)
	}
	in.Reopen = &runapi.Reopen{Update: name, Task: req}
	// The reopened run goes where the run ran, whatever queue this starter
	// would start new work on.
	runs.TaskQueue = desc.GetWorkflowExecutionInfo().GetTaskQueue()
	run, err := runs.Start(ctx, in, runapi.StartOptions{Reopened: name + " " + req.Task})
	if err != nil {
		return fmt.Errorf("reopen run %s: %w", slug, err)
	}
	fmt.Fprintf(stdout, "run %s had ended; reopened (run %s) to %s %s\n", slug, run.GetRunID(), name, req.Task)
	return nil
}

// checkReopen applies the request to the ended run's document, as the
// reopened workflow will, and says why it would not apply.
func checkReopen(in runapi.RunInput, name string, req runapi.TaskRequest) error {
	r, err := runplan.Parse(in.Run)
	if err != nil {
		return err
	}
	var st struct {
		Doc runstatus.Status `json:"doc"`
	}
	if err := json.Unmarshal(in.Resume, &st); err != nil {
		return fmt.Errorf("its state: %w", err)
	}
	doc := st.Doc
	if err := doc.Bind(r); err != nil {
		return err
	}
	if err := doc.Reopen(); err != nil {
		return err
	}
	if name == runapi.UpdateSkip {
		return doc.Skip(req.Task)
	}
	if t := doc.Tasks[req.Task]; t != nil && t.Status == runstatus.TaskNeedsHumanRebase {
		return doc.RetryMerge(req.Task)
	}
	return doc.Retry(req.Task)
}
