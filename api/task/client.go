package taskapi

import (
	"context"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/internal/tracing"
	"karvi-edda-temporal/traces"
)

// Tasks is every Temporal call a client makes on task workflows: how a
// task is started (its id, policies and summary are decided here and
// nowhere else), what attempt a new workflow of it starts at, and its
// signals, queries, updates and result. Errors are the SDK's, unwrapped,
// so a caller tells a missing or already started workflow apart
// (serviceerror.NotFound, serviceerror.WorkflowExecutionAlreadyStarted)
// and says what it was doing in its own words.
type Tasks struct {
	Client client.Client
	// TaskQueue is where Start runs a task.
	TaskQueue string
}

// StartOptions is what differs between the callers that start tasks.
type StartOptions struct {
	// Memo marks the workflow with who started it, so a start retried
	// later recognizes its own.
	Memo map[string]any
	// NeverUsed refuses an id used before, even by a closed workflow;
	// otherwise a closed task's id is taken again (a new attempt).
	NeverUsed bool
	// StartedBy ends the static details: who started the task, for the
	// Web UI.
	StartedBy string
}

// Start starts a task's workflow. A running workflow of the task's id is
// refused (serviceerror.WorkflowExecutionAlreadyStarted), never re-attached
// to: one conductor per task.
func (x Tasks) Start(ctx context.Context, in TaskInput, o StartOptions) (client.WorkflowRun, error) {
	summary, details := StartSummary(in.Dispatch, in.Attempt)
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	if o.NeverUsed {
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	}
	// Every start of a task begins its trace here, whoever starts it
	// (docs/traces.md); without tracing ctx is left as it is.
	ctx = tracing.WithRoot(ctx, traces.ForTask(in.Dispatch.TaskID, in.Dispatch.PlanID))
	return x.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       WorkflowID(in.Dispatch.TaskID),
		TaskQueue:                                x.TaskQueue,
		StaticSummary:                            summary,
		StaticDetails:                            details + o.StartedBy,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    reuse,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     o.Memo,
	}, TaskWorkflowName, in)
}

// NextAttempt is the attempt a new workflow of the task starts at after
// its closed run runID ("" the latest): the one after the attempt that
// run's result names, and at least floor. A run without a result (it
// failed, was terminated, or cannot be read) leaves floor.
func (x Tasks) NextAttempt(ctx context.Context, taskID, runID string, floor int) int {
	if prev, err := x.Result(ctx, taskID, runID); err == nil && prev.Attempt > 0 {
		return max(floor, prev.Attempt+1)
	}
	return floor
}

// Previous is what a start learns of a task's last workflow.
type Previous struct {
	Running bool
	RunID   string
	// Status is the workflow's status in lower case ("completed",
	// "running", ...).
	Status string
	// Attempt is the attempt it ended on (or runs), 0 when unknown.
	Attempt int
}

// Last describes the task's last workflow; ok is false when it has none,
// or it cannot be described. A running one is asked its attempt (within
// a few seconds: it only serves a message), a closed one's is its
// result's.
func (x Tasks) Last(ctx context.Context, taskID string) (p Previous, ok bool) {
	desc, err := x.Describe(ctx, taskID, "")
	if err != nil {
		return Previous{}, false
	}
	info := desc.GetWorkflowExecutionInfo()
	p = Previous{RunID: info.GetExecution().GetRunId(),
		Status: strings.ToLower(strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"))}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		p.Running = true
		var s Status
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := x.Query(qctx, taskID, p.RunID, QueryStatus, &s); err == nil {
			p.Attempt = s.Attempt
		}
		return p, true
	}
	if res, err := x.Result(ctx, taskID, p.RunID); err == nil {
		p.Attempt = res.Attempt
	}
	return p, true
}

// Describe describes the task's workflow run ("" the latest).
func (x Tasks) Describe(ctx context.Context, taskID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return x.Client.DescribeWorkflowExecution(ctx, WorkflowID(taskID), runID)
}

// Running reports whether the task's latest workflow runs.
func (x Tasks) Running(ctx context.Context, taskID string) (bool, error) {
	desc, err := x.Describe(ctx, taskID, "")
	if err != nil {
		return false, err
	}
	return desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// Signal sends one of the task's signals (SignalAbort, SignalRedispatch,
// ...) with its payload to run runID ("" the latest).
func (x Tasks) Signal(ctx context.Context, taskID, runID, name string, payload any) error {
	return x.Client.SignalWorkflow(ctx, WorkflowID(taskID), runID, name, payload)
}

// Abort stops the task's conductor and ends it (SignalAbort).
func (x Tasks) Abort(ctx context.Context, taskID, runID, reason string) error {
	return x.Signal(ctx, taskID, runID, SignalAbort, AbortSignal{Reason: reason})
}

// Redispatch stops the task's conductor and starts a new attempt
// (SignalRedispatch).
func (x Tasks) Redispatch(ctx context.Context, taskID, runID, reason string) error {
	return x.Signal(ctx, taskID, runID, SignalRedispatch, RedispatchSignal{Reason: reason})
}

// Query asks the task's workflow run ("" the latest) one of its queries
// and decodes the answer into out.
func (x Tasks) Query(ctx context.Context, taskID, runID, name string, out any, args ...any) error {
	v, err := x.Client.QueryWorkflow(ctx, WorkflowID(taskID), runID, name, args...)
	if err != nil {
		return err
	}
	return v.Get(out)
}

// Status answers QueryStatus.
func (x Tasks) Status(ctx context.Context, taskID string) (Status, error) {
	var s Status
	return s, x.Query(ctx, taskID, "", QueryStatus, &s)
}

// Run is the task's workflow run runID ("" the latest), to wait for its
// result; it follows continue-as-new.
func (x Tasks) Run(taskID, runID string) client.WorkflowRun {
	return x.Client.GetWorkflow(context.Background(), WorkflowID(taskID), runID)
}

// Result waits for the task's workflow run runID ("" the latest) to end
// and reads its result.
func (x Tasks) Result(ctx context.Context, taskID, runID string) (Result, error) {
	var res Result
	return res, x.Client.GetWorkflow(ctx, WorkflowID(taskID), runID).Get(ctx, &res)
}

// ReadEvents reads a page of a canonical event stream through its reader
// workflow (readerID, started with in when none runs, on the client's
// task queue; what names the stream for the Web UI).
func (x Tasks) ReadEvents(ctx context.Context, readerID, what string, in EventsInput, req EventsRead) (EventsPage, error) {
	start := x.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       readerID,
		TaskQueue:                x.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            "reads the event stream of " + what,
	}, EventsWorkflowName, in)
	h, err := x.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   UpdateReadEvents,
			Args:         []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return EventsPage{}, err
	}
	var page EventsPage
	return page, h.Get(ctx, &page)
}
