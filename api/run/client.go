package runapi

import (
	"context"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/internal/tracing"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/traces"
)

// SlugOf is the run a run workflow id names ("" for another id).
func SlugOf(workflowID string) string {
	slug, ok := strings.CutPrefix(workflowID, WorkflowID(""))
	if !ok {
		return ""
	}
	return slug
}

// Runs is every Temporal call a client makes on run workflows: how a run
// is started (its id, policies and summary are decided here and nowhere
// else), and its updates, queries and result. Errors are the SDK's,
// unwrapped, so a caller tells a missing or already started workflow
// apart and says what it was doing in its own words.
type Runs struct {
	Client client.Client
	// TaskQueue is where Start runs a run.
	TaskQueue string
}

// StartOptions is what differs between the callers that start runs.
type StartOptions struct {
	// Memo marks the workflow with who started it.
	Memo map[string]any
	// NeverUsed refuses an id used before, even by a closed workflow.
	NeverUsed bool
	// StartedBy ends the static details: who started the run.
	StartedBy string
	// Reopened ends the summary: why an ended run was started again.
	Reopened string
}

// Start starts the run in.Run (packed or not) describes. A running
// workflow of the run's id is refused
// (serviceerror.WorkflowExecutionAlreadyStarted).
func (x Runs) Start(ctx context.Context, in RunInput, o StartOptions) (client.WorkflowRun, error) {
	plain, err := in.Unpack()
	if err != nil {
		return nil, err
	}
	r, err := runplan.Parse(plain.Run)
	if err != nil {
		return nil, err
	}
	summary, details := StartSummary(r)
	if o.Reopened != "" {
		summary += ", reopened to " + o.Reopened
	}
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	if o.NeverUsed {
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	}
	// Every start of a run begins its trace here, whoever starts it
	// (docs/traces.md); the run's tasks join it as its children.
	ctx = tracing.WithRoot(ctx, traces.ForRun(r.Slug))
	return x.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       WorkflowID(r.Slug),
		TaskQueue:                                x.TaskQueue,
		StaticSummary:                            summary,
		StaticDetails:                            details + o.StartedBy,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    reuse,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     o.Memo,
	}, RunWorkflowName, in)
}

// StartSummary is the Web UI's summary and static details of a run: its
// title, goal and tasks.
func StartSummary(r runplan.Run) (summary, details string) {
	summary = fmt.Sprintf("Run %s: %s (%d tasks)", r.Slug, r.Title, len(r.Tasks))
	details = fmt.Sprintf("**%s**\n\n", r.Title)
	if r.Goal != "" {
		details += r.Goal + "\n\n"
	}
	details += fmt.Sprintf("%d tasks, concurrency %d", len(r.Tasks), r.Concurrency)
	if r.Repo != "" {
		details += ", repository " + r.Repo
	}
	return summary, details
}

// Update sends one of the run's updates (UpdatePause, UpdateRetry, ...;
// arg nil for none) and waits for its answer: a refusal is the run's
// temporal.ApplicationError.
func (x Runs) Update(ctx context.Context, slug, name string, arg any) error {
	var args []any
	if arg != nil {
		args = []any{arg}
	}
	h, err := x.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   WorkflowID(slug),
		UpdateName:   name,
		Args:         args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, nil)
}

// Query asks the run's latest workflow one of its queries and decodes
// the answer into out.
func (x Runs) Query(ctx context.Context, slug, name string, out any, args ...any) error {
	v, err := x.Client.QueryWorkflow(ctx, WorkflowID(slug), "", name, args...)
	if err != nil {
		return err
	}
	return v.Get(out)
}

// Status answers QueryStatus: the run's status.json document.
func (x Runs) Status(ctx context.Context, slug string) (runstatus.Status, error) {
	var doc runstatus.Status
	return doc, x.Query(ctx, slug, QueryStatus, &doc)
}

// Describe describes the run's latest workflow.
func (x Runs) Describe(ctx context.Context, slug string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return x.Client.DescribeWorkflowExecution(ctx, WorkflowID(slug), "")
}

// Run is the run's workflow run runID ("" the latest), to wait for its
// final document; it follows continue-as-new.
func (x Runs) Run(slug, runID string) client.WorkflowRun {
	return x.Client.GetWorkflow(context.Background(), WorkflowID(slug), runID)
}
