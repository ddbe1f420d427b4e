package intakeact

import (
	"context"
	"fmt"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"karvi-edda-temporal/api/task"
)

// fakeTemporal keeps workflow runs by id, as Temporal does for what the
// intake asks of it: a start obeys the conflict and reuse policies,
// describe and signal go to the latest run unless a run id is given. What
// it does not fake panics (the embedded client is nil).
type fakeTemporal struct {
	client.Client
	mu      sync.Mutex
	runs    map[string][]*fakeRun // oldest first
	signals []fakeSignal
	n       int
}

type fakeRun struct {
	id, runID string
	status    enumspb.WorkflowExecutionStatus
	memo      map[string]any
	parent    string // the parent's workflow id, for a run's child
	input     any
	result    *taskapi.Result
}

type fakeSignal struct{ id, runID, name string }

func newFakeTemporal() *fakeTemporal { return &fakeTemporal{runs: map[string][]*fakeRun{}} }

// add records a run of workflow id as if someone else had started it.
func (f *fakeTemporal) add(r fakeRun) *fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if r.runID == "" {
		r.runID = fmt.Sprintf("run-%d", f.n)
	}
	f.runs[r.id] = append(f.runs[r.id], &r)
	return &r
}

func (f *fakeTemporal) latest(id string) *fakeRun {
	rs := f.runs[id]
	if len(rs) == 0 {
		return nil
	}
	return rs[len(rs)-1]
}

func (f *fakeTemporal) find(id, runID string) *fakeRun {
	if runID == "" {
		return f.latest(id)
	}
	for _, r := range f.runs[id] {
		if r.runID == runID {
			return r
		}
	}
	return nil
}

// started are the runs of id the code under test started.
func (f *fakeTemporal) started(id string) []*fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fakeRun
	for _, r := range f.runs[id] {
		if r.input != nil {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeTemporal) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if last := f.latest(o.ID); last != nil {
		running := last.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		if running && o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING ||
			!running && o.WorkflowIDReusePolicy == enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE {
			return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("workflow execution already started", "", last.runID)
		}
		if running {
			return &fakeWorkflowRun{f: f, id: o.ID, runID: last.runID}, nil
		}
	}
	f.n++
	var in any = true
	if len(args) > 0 {
		in = args[0]
	}
	r := &fakeRun{id: o.ID, runID: fmt.Sprintf("run-%d", f.n), status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		memo: o.Memo, input: in}
	f.runs[o.ID] = append(f.runs[o.ID], r)
	return &fakeWorkflowRun{f: f, id: o.ID, runID: r.runID}, nil
}

func (f *fakeTemporal) DescribeWorkflowExecution(_ context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.find(id, runID)
	if r == nil {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	fields := map[string]*commonpb.Payload{}
	for k, v := range r.memo {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			return nil, err
		}
		fields[k] = p
	}
	info := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: r.runID},
		Status:    r.status, Memo: &commonpb.Memo{Fields: fields},
	}
	if r.parent != "" {
		info.ParentExecution = &commonpb.WorkflowExecution{WorkflowId: r.parent, RunId: "parent-run"}
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}, nil
}

func (f *fakeTemporal) GetWorkflow(_ context.Context, id, runID string) client.WorkflowRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.find(id, runID); r != nil {
		runID = r.runID
	}
	return &fakeWorkflowRun{f: f, id: id, runID: runID}
}

func (f *fakeTemporal) SignalWorkflow(_ context.Context, id, runID, name string, _ any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.find(id, runID)
	if r == nil || r.status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return serviceerror.NewNotFound("workflow execution already completed")
	}
	f.signals = append(f.signals, fakeSignal{id: id, runID: r.runID, name: name})
	return nil
}

func (f *fakeTemporal) signalled() []fakeSignal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeSignal(nil), f.signals...)
}

// fakeWorkflowRun answers Get with the run's result; a run that is not
// closed with one answers an error.
type fakeWorkflowRun struct {
	client.WorkflowRun
	f         *fakeTemporal
	id, runID string
}

func (w *fakeWorkflowRun) GetID() string    { return w.id }
func (w *fakeWorkflowRun) GetRunID() string { return w.runID }

func (w *fakeWorkflowRun) Get(_ context.Context, out any) error {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	r := w.f.find(w.id, w.runID)
	if r == nil || r.result == nil {
		return fmt.Errorf("workflow %s run %s has no result", w.id, w.runID)
	}
	res, ok := out.(*taskapi.Result)
	if !ok {
		return fmt.Errorf("fake: Get into %T", out)
	}
	*res = *r.result
	return nil
}
