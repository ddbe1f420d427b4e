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

	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/workflows/runapi"
)

// startRun starts the run workflow of a run file. The file is checked here
// first, so a bad one is refused before anything reaches Temporal.
func startRun(ctx context.Context, cl client.Client, taskQueue string, inv invocation, stdin io.Reader, stdout io.Writer) error {
	data, err := readInput(inv.arg, stdin)
	if err != nil {
		return fmt.Errorf("read run file: %w", err)
	}
	r, err := runplan.Parse(data)
	if err != nil {
		return err
	}
	in := runapi.RunInput{Run: json.RawMessage(data), Repo: inv.opts.repo, FeatureBranch: inv.opts.featureBranch, Pool: inv.opts.pool}
	id := runapi.WorkflowID(r.Slug)
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                taskQueue,
		StaticSummary:                            fmt.Sprintf("Run %s: %s (%d tasks)", r.Slug, r.Title, len(r.Tasks)),
		StaticDetails:                            runDetails(r),
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, runapi.RunWorkflowName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return fmt.Errorf("run %s is already running (%s, run %s)", r.Slug, id, started.RunId)
		}
		return fmt.Errorf("start workflow %s: %w", id, err)
	}
	fmt.Fprintf(stdout, "started %s run %s: %d tasks, concurrency %d\n", id, run.GetRunID(), len(r.Tasks), r.Concurrency)
	if !inv.opts.wait {
		return nil
	}
	if err := run.Get(ctx, nil); err != nil {
		return fmt.Errorf("run %s: %w", r.Slug, err)
	}
	return runStatus(ctx, temporalRuns{cl}, r.Slug, stdout, runStatusOptionsFor(stdout, options{}))
}

// runDetails is the Web UI's static details of a run: its goal and tasks.
func runDetails(r runplan.Run) string {
	s := fmt.Sprintf("**%s**\n\n", r.Title)
	if r.Goal != "" {
		s += r.Goal + "\n\n"
	}
	s += fmt.Sprintf("%d tasks, concurrency %d", len(r.Tasks), r.Concurrency)
	if r.Repo != "" {
		s += ", repository " + r.Repo
	}
	return s
}

// updateRun sends one of the run's updates and waits for its answer: a
// refusal comes back with the run's reason.
func updateRun(ctx context.Context, cl client.Client, slug, name string, arg any, stdout io.Writer) error {
	id := runapi.WorkflowID(slug)
	var args []any
	if arg != nil {
		args = []any{arg}
	}
	h, err := cl.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   name,
		Args:         args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return fmt.Errorf("run %s has no running workflow (%s): nothing to %s", slug, id, name)
		}
		return fmt.Errorf("run %s: %s: %w", slug, name, err)
	}
	fmt.Fprintf(stdout, "run %s: %s done\n", slug, name)
	return nil
}
