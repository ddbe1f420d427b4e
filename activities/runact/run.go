package runact

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/tracing"
)

// ErrBadRunStatus: the run's status document or slug cannot be written as
// given. Retrying cannot help.
const ErrBadRunStatus = "BadRunStatus"

// Activities are the side effects of the run workflow besides its git
// steps (GitActivities): its status.json, its canonical stream, and waiting
// for task workflows started by an earlier run of the workflow, for which
// they hold a Temporal client.
type Activities struct {
	Config   activities.Config
	Temporal activities.WorkflowAwaiter
	// Traces exports the run's span when it ends (traces.go); nil none.
	Traces *tracing.Emitter

	// streams holds the runs' canonical streams, opened on first use.
	streams activities.Streams

	// status holds each run's status.json as this worker last wrote it
	// (WriteRunStatus), by slug.
	statusMu sync.Mutex
	status   map[string]*statusDoc
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

	// Writer and Seq name the write: the workflow run that asks for it
	// and its number among that run's writes. The worker keeps the last
	// document it wrote for each run under them, so that the next write
	// can ship only what changed.
	Writer string `json:"writer,omitempty"`
	Seq    int    `json:"seq,omitempty"`
	// Patch, instead of Document: Top is the document without its tasks
	// and Tasks the entries that changed since write Seq-1 of Writer.
	// When this worker does not hold that write (it restarted, or the
	// workflow moved to another worker), the answer is NeedBase and
	// nothing is written: the workflow sends the whole Document then.
	Patch bool                       `json:"patch,omitempty"`
	Top   json.RawMessage            `json:"top,omitempty"`
	Tasks map[string]json.RawMessage `json:"tasks,omitempty"`
	// Final: the run has ended; the worker forgets its document.
	Final bool `json:"final,omitempty"`
}

// RunStatusResult says where the document went.
type RunStatusResult struct {
	Paths []string `json:"paths"`
	// NeedBase: a Patch found no base to apply to; send the Document.
	NeedBase bool `json:"needBase,omitempty"`
}

// RunStatusPath is where a run's status.json lives under the work root.
func RunStatusPath(root, slug string) string {
	return filepath.Join(root, "prds", slug, "status.json")
}

// WriteRunStatus replaces the run's status.json (and its copy in the run's
// repository) with the document, atomically: a reader sees the old document
// or the new one, never part of one. Writing the same document again is
// harmless, so a retry after a crash is too.
func (a *Activities) WriteRunStatus(ctx context.Context, req RunStatusRequest) (RunStatusResult, error) {
	if !slugRE.MatchString(req.Slug) {
		return RunStatusResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("run slug %q is not kebab-case", req.Slug), ErrBadRunStatus, nil)
	}
	a.statusMu.Lock()
	defer a.statusMu.Unlock()
	var doc *statusDoc
	written := false
	if req.Patch {
		base := a.status[req.Slug]
		if base == nil || base.writer != req.Writer || (base.seq != req.Seq-1 && base.seq != req.Seq) {
			return RunStatusResult{NeedBase: true}, nil
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(req.Top, &top); err != nil {
			return RunStatusResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("run %s: status document is not JSON: %v", req.Slug, err), ErrBadRunStatus, err)
		}
		p, err := preparePatch(top, req.Tasks)
		if err != nil {
			return RunStatusResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("run %s: status document is not JSON: %v", req.Slug, err), ErrBadRunStatus, err)
		}
		// Applied in place and undone should the write fail, so the base
		// stays what the file holds; the document is not copied whole.
		undo := base.apply(p, req.Writer, req.Seq)
		defer func() {
			if !written {
				undo()
			}
		}()
		doc = base
	} else {
		d, err := splitStatus(req.Document)
		if err != nil {
			return RunStatusResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("run %s: status document is not JSON: %v", req.Slug, err), ErrBadRunStatus, err)
		}
		d.writer, d.seq = req.Writer, req.Seq
		doc = d
	}
	data, err := doc.render()
	if err != nil {
		return RunStatusResult{}, fmt.Errorf("run %s: encode status: %w", req.Slug, err)
	}
	layout, err := activities.NewLayout(a.Config.WorkRoot)
	if err != nil {
		return RunStatusResult{}, err
	}
	if len(req.Steps) > 0 {
		st, err := a.streams.Open(a.Config)
		if err != nil {
			return RunStatusResult{}, err
		}
		if _, err := activities.AppendTo(ctx, st, canonical.RunIDForRun(req.Slug), req.Steps); err != nil {
			return RunStatusResult{}, fmt.Errorf("run %s: store its events: %w", req.Slug, err)
		}
		a.traceRun(ctx, st, req.Slug, req.Steps)
	}
	paths := []string{RunStatusPath(layout.Root(), req.Slug)}
	if req.Repo != "" {
		repo := activities.ResolveExisting(filepath.Clean(req.Repo))
		if !layout.Contains(repo) {
			return RunStatusResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("run %s: repository %s is outside the work root %s", req.Slug, req.Repo, layout.Root()), ErrBadRunStatus, nil)
		}
		paths = append(paths, filepath.Join(repo, ".karimo", "prds", req.Slug, "status.json"))
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return RunStatusResult{}, fmt.Errorf("run %s: %w", req.Slug, err)
		}
		if err := activities.WriteFileAtomic(p, data); err != nil {
			return RunStatusResult{}, fmt.Errorf("run %s: %w", req.Slug, err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			return RunStatusResult{}, fmt.Errorf("run %s: %w", req.Slug, err)
		}
	}
	written = true
	if a.status == nil {
		a.status = map[string]*statusDoc{}
	}
	if req.Final || req.Writer == "" {
		delete(a.status, req.Slug)
	} else {
		a.status[req.Slug] = doc
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
func (a *Activities) AwaitTask(ctx context.Context, req AwaitTaskRequest) (AwaitTaskResult, error) {
	if a.Temporal == nil {
		return AwaitTaskResult{}, temporal.NewNonRetryableApplicationError(
			"the worker has no Temporal client for the run activities", "NoClient", nil)
	}
	var res taskapi.Result
	failure, err := activities.AwaitWorkflow(ctx, a.Temporal, req.WorkflowID, req.RunID, &res)
	switch {
	case err != nil:
		return AwaitTaskResult{}, err
	case failure != "":
		return AwaitTaskResult{Failure: failure}, nil
	}
	return AwaitTaskResult{Result: &res}, nil
}
