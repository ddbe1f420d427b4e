package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/errtext"
	"karvi-edda-temporal/workflows/taskflow/taskapi"
)

// ErrBadRunStatus: the run's status document or slug cannot be written as
// given. Retrying cannot help.
const ErrBadRunStatus = "BadRunStatus"

// WorkflowAwaiter is the part of a Temporal client AwaitTask needs.
type WorkflowAwaiter interface {
	GetWorkflow(ctx context.Context, workflowID, runID string) client.WorkflowRun
}

// RunActivities are the side effects of the run workflow. They are apart from
// the task's Activities because they need what a task's do not: a Temporal
// client, to wait for task workflows started by an earlier run of the
// workflow.
type RunActivities struct {
	Config   Config
	Temporal WorkflowAwaiter

	// streams holds the runs' canonical streams, opened on first use.
	streams streams
}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// RunStatusRequest asks for a run's status.json to be written.
type RunStatusRequest struct {
	Slug string `json:"slug"`
	// Document is the status.json document, written as given (indented).
	Document json.RawMessage `json:"document"`
	// Repo is the run's repository (as RepoDir resolves it), when it has
	// one: the document is also written to .karimo/prds/<slug>/ in it.
	Repo string `json:"repo,omitempty"`
	// Steps are the run's canonical events since the last write, stored in
	// the run's stream (canonical.RunIDForRun) before the document.
	Steps []canonical.Event `json:"steps,omitempty"`
}

// RunStatusResult says where the document went.
type RunStatusResult struct {
	Paths []string `json:"paths"`
}

// RunStatusPath is where a run's status.json lives under the work root.
func RunStatusPath(root, slug string) string {
	return filepath.Join(root, "prds", slug, "status.json")
}

// WriteRunStatus replaces the run's status.json (and its copy in the run's
// repository) with the document, atomically: a reader sees the old document
// or the new one, never part of one. Writing the same document again is
// harmless, so a retry after a crash is too.
func (a *RunActivities) WriteRunStatus(ctx context.Context, req RunStatusRequest) (RunStatusResult, error) {
	if !slugRE.MatchString(req.Slug) {
		return RunStatusResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("run slug %q is not kebab-case", req.Slug), ErrBadRunStatus, nil)
	}
	var doc any
	if err := json.Unmarshal(req.Document, &doc); err != nil {
		return RunStatusResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("run %s: status document is not JSON: %v", req.Slug, err), ErrBadRunStatus, err)
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return RunStatusResult{}, fmt.Errorf("run %s: encode status: %w", req.Slug, err)
	}
	data = append(data, '\n')
	layout, err := NewLayout(a.Config.WorkRoot)
	if err != nil {
		return RunStatusResult{}, err
	}
	if len(req.Steps) > 0 {
		st, err := a.streams.open(a.Config)
		if err != nil {
			return RunStatusResult{}, err
		}
		if _, err := appendTo(ctx, st, canonical.RunIDForRun(req.Slug), req.Steps); err != nil {
			return RunStatusResult{}, fmt.Errorf("run %s: store its events: %w", req.Slug, err)
		}
	}
	paths := []string{RunStatusPath(layout.Root(), req.Slug)}
	if req.Repo != "" {
		repo := resolveExisting(filepath.Clean(req.Repo))
		if !layout.contains(repo) {
			return RunStatusResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("run %s: repository %s is outside the work root %s", req.Slug, req.Repo, layout.Root()), ErrBadRunStatus, nil)
		}
		paths = append(paths, filepath.Join(repo, ".karimo", "prds", req.Slug, "status.json"))
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return RunStatusResult{}, fmt.Errorf("run %s: %w", req.Slug, err)
		}
		if err := writeFileAtomic(p, data); err != nil {
			return RunStatusResult{}, fmt.Errorf("run %s: %w", req.Slug, err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			return RunStatusResult{}, fmt.Errorf("run %s: %w", req.Slug, err)
		}
	}
	return RunStatusResult{Paths: paths}, nil
}

// AwaitTaskRequest names a task workflow run to wait for.
type AwaitTaskRequest struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
}

// AwaitTaskResult is how the awaited run closed: its result when it
// completed (following its continue-as-new chain), else what closed it.
type AwaitTaskResult struct {
	Result *taskapi.Result `json:"result,omitempty"`
	// Failure says why the workflow closed without a result: failed,
	// terminated, timed out or cancelled, with the error.
	Failure string `json:"failure,omitempty"`
}

// AwaitTask waits for a task workflow started by an earlier run of the run
// workflow (its child future did not survive continue-as-new) and returns
// how it ended. It heartbeats while it waits, so a dead worker is noticed
// and the wait resumes elsewhere; waiting again is harmless.
func (a *RunActivities) AwaitTask(ctx context.Context, req AwaitTaskRequest) (AwaitTaskResult, error) {
	if a.Temporal == nil {
		return AwaitTaskResult{}, temporal.NewNonRetryableApplicationError(
			"the worker has no Temporal client for the run activities", "NoClient", nil)
	}
	var res taskapi.Result
	failure, err := awaitWorkflow(ctx, a.Temporal, req.WorkflowID, req.RunID, &res)
	switch {
	case err != nil:
		return AwaitTaskResult{}, err
	case failure != "":
		return AwaitTaskResult{Failure: failure}, nil
	}
	return AwaitTaskResult{Result: &res}, nil
}

// awaitWorkflow waits for a workflow run to close, following its
// continue-as-new chain and heartbeating meanwhile, and decodes its result
// into out. A workflow that closed without one (failed, terminated, timed
// out, cancelled, not found) gives failure, saying why; a wait that failed
// (the server, the network) gives err, so the activity is retried and
// waits again.
func awaitWorkflow(ctx context.Context, cl WorkflowAwaiter, id, runID string, out any) (failure string, err error) {
	stop := heartbeat(ctx, heartbeatEvery)
	defer stop()
	err = cl.GetWorkflow(ctx, id, runID).Get(ctx, out)
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		return "", nil
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.As(err, &notFound):
		return fmt.Sprintf("%s not found", id), nil
	case closedWithoutResult(err):
		return fmt.Sprintf("%s ended without a result: %s", id, errtext.Root(err)), nil
	}
	return "", fmt.Errorf("wait for %s: %w", id, err)
}

// closedWithoutResult tells a workflow that ended badly from a failed wait.
func closedWithoutResult(err error) bool {
	var (
		closed     *temporal.WorkflowExecutionError
		terminated *temporal.TerminatedError
		timeout    *temporal.TimeoutError
		canceled   *temporal.CanceledError
		app        *temporal.ApplicationError
		panicked   *temporal.PanicError
	)
	return errors.As(err, &closed) || errors.As(err, &terminated) || errors.As(err, &timeout) || errors.As(err, &canceled) ||
		errors.As(err, &app) || errors.As(err, &panicked)
}
