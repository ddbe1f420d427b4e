package slotact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/slots"
)

// fakeSlotClient answers as the server would: an update's outcome (or its
// refusal), and a description per workflow id.
type fakeSlotClient struct {
	mu        sync.Mutex
	start     client.StartWorkflowOptions
	startArgs []any
	update    client.UpdateWorkflowOptions
	answer    slots.Answer
	updateErr error // what the update's outcome is (a validator refusal)
	described map[string]*workflowservice.DescribeWorkflowExecutionResponse
	describe  map[string]error
	// many answers an acquire-many update, nil: each request's task as its
	// answer's Detail, queued at its place in the batch.
	many func(slotapi.AcquireMany) (slotapi.AcquireManyResult, error)
	// gate, when set, holds every acquire-many update until it is closed.
	gate chan struct{}
	// batches are the acquire-many updates sent; singles the acquire ones.
	batches []slotapi.AcquireMany
	ids     []string
	singles []slots.Request
	// inFlight counts the acquire-many updates under way, mostInFlight
	// the most at once.
	inFlight, mostInFlight int
}

type startOp struct {
	client.WithStartWorkflowOperation
}

func (f *fakeSlotClient) NewWithStartWorkflowOperation(o client.StartWorkflowOptions, _ any, args ...any) client.WithStartWorkflowOperation {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start, f.startArgs = o, args
	return startOp{}
}

func (f *fakeSlotClient) UpdateWithStartWorkflow(ctx context.Context, o client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if o.UpdateOptions.UpdateName == slotapi.UpdateAcquireMany {
		req := o.UpdateOptions.Args[0].(slotapi.AcquireMany)
		f.mu.Lock()
		f.batches = append(f.batches, req)
		f.ids = append(f.ids, o.UpdateOptions.UpdateID)
		gate, many := f.gate, f.many
		f.inFlight++
		f.mostInFlight = max(f.mostInFlight, f.inFlight)
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.inFlight--
			f.mu.Unlock()
		}()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if many == nil {
			many = queuedInOrder
		}
		res, err := many(req)
		return manyHandle{res: res, err: err}, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.update = o.UpdateOptions
	f.singles = append(f.singles, o.UpdateOptions.Args[0].(slots.Request))
	return fakeHandle{f}, nil
}

// queuedInOrder answers each request of a batch queued at its place in
// the batch, with its task as the Detail, so an asker can tell its own.
func queuedInOrder(m slotapi.AcquireMany) (slotapi.AcquireManyResult, error) {
	var res slotapi.AcquireManyResult
	for i, r := range m.Requests {
		res.Answers = append(res.Answers, slotapi.ManyAnswer{Answer: slots.Answer{State: slots.Queued, Position: i + 1, Detail: r.Key.Task}})
	}
	return res, nil
}

type manyHandle struct {
	client.WorkflowUpdateHandle
	res slotapi.AcquireManyResult
	err error
}

func (h manyHandle) Get(_ context.Context, v any) error {
	if h.err != nil {
		return h.err
	}
	data, _ := json.Marshal(h.res)
	return json.Unmarshal(data, v)
}

func (f *fakeSlotClient) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, errors.New("the fake answers no query")
}

func (f *fakeSlotClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if err := f.describe[id]; err != nil {
		return nil, err
	}
	return f.described[id], nil
}

type fakeHandle struct{ f *fakeSlotClient }

func (h fakeHandle) WorkflowID() string { return h.f.update.WorkflowID }
func (h fakeHandle) RunID() string      { return "run" }
func (h fakeHandle) UpdateID() string   { return h.f.update.UpdateID }
func (h fakeHandle) Get(_ context.Context, v any) error {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if h.f.updateErr != nil {
		return h.f.updateErr
	}
	data, _ := json.Marshal(h.f.answer)
	return json.Unmarshal(data, v)
}

func slotActivityEnv(f *fakeSlotClient) *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(&Activities{Temporal: f, BatchWindow: -1})
	return env
}

func TestAcquireSlotStartsThePoolOnDemandAndAsksOnce(t *testing.T) {
	f := &fakeSlotClient{answer: slots.Answer{State: slots.Queued, Position: 3}}
	env := slotActivityEnv(f)
	req := slots.Request{Key: slots.Key{Task: "T5", Attempt: 2}, Run: "r", Owner: slots.Owner{WorkflowID: "karvi-task-T5"}}
	v, err := env.ExecuteActivity((&Activities{}).AcquireSlot, AcquireSlotRequest{Pool: "agents", Request: req})
	require.NoError(t, err)
	var ans slots.Answer
	require.NoError(t, v.Get(&ans))
	require.Equal(t, f.answer, ans)

	require.Equal(t, "karvi-slots-agents", f.start.ID)
	require.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, f.start.WorkflowIDConflictPolicy)
	require.True(t, strings.HasSuffix(f.start.TaskQueue, "-slot-pools"), "the pool runs on the pools' queue beside the acquiring worker's, not %q", f.start.TaskQueue)
	require.Equal(t, []any{slotapi.PoolInput{Pool: "agents"}}, f.startArgs)
	require.Equal(t, "karvi-slots-agents", f.update.WorkflowID)
	require.Equal(t, slotapi.UpdateAcquire, f.update.UpdateName)
	require.Equal(t, "acquire/T5/2", f.update.UpdateID, "one update id per key: a retry is answered by the first")
	require.Equal(t, client.WorkflowUpdateStageCompleted, f.update.WaitForStage)
	require.Equal(t, []any{req}, f.update.Args)
}

func TestAcquireSlotRefusalsAreFinal(t *testing.T) {
	f := &fakeSlotClient{updateErr: temporal.NewApplicationError("key: attempt 0 must be at least 1", "")}
	env := slotActivityEnv(f)
	_, err := env.ExecuteActivity((&Activities{}).AcquireSlot, AcquireSlotRequest{Pool: "agents"})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrBadSlotRequest, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, err.Error(), "attempt 0 must be at least 1")

	_, err = env.ExecuteActivity((&Activities{}).AcquireSlot, AcquireSlotRequest{Pool: "no such/pool"})
	require.True(t, errors.As(err, &app))
	require.Equal(t, ErrBadSlotRequest, app.Type())
}

func described(status enumspb.WorkflowExecutionStatus, firstRun string) *workflowservice.DescribeWorkflowExecutionResponse {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: status, FirstRunId: firstRun}}
}

func TestCheckHoldersSortsHoldersByTheirWorkflows(t *testing.T) {
	f := &fakeSlotClient{
		described: map[string]*workflowservice.DescribeWorkflowExecutionResponse{
			"karvi-task-run":  described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "r1"),
			"karvi-task-term": described(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, "r2"),
			"karvi-task-done": described(enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, "r3"),
			"karvi-task-new":  described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "other"),
		},
		describe: map[string]error{
			"karvi-task-gone":  serviceerror.NewNotFound("workflow not found"),
			"karvi-task-flaky": serviceerror.NewUnavailable("try again"),
		},
	}
	env := slotActivityEnv(f)
	holder := func(task, firstRun string) slots.Holder {
		return slots.Holder{Key: slots.Key{Task: task, Attempt: 1}, Owner: slots.Owner{WorkflowID: "karvi-task-" + task, FirstRunID: firstRun}}
	}
	v, err := env.ExecuteActivity((&Activities{}).CheckHolders, CheckHoldersRequest{Pool: "agents", Holders: []slots.Holder{
		holder("run", "r1"), holder("term", "r2"), holder("done", "r3"), holder("new", "r4"),
		holder("gone", "r5"), holder("flaky", "r6"), {Key: slots.Key{Task: "nobody", Attempt: 1}},
	}})
	require.NoError(t, err)
	var res CheckHoldersResult
	require.NoError(t, v.Get(&res))
	require.Equal(t, []slots.Key{{Task: "run", Attempt: 1}}, res.Running)
	require.Equal(t, 2, res.Unknown, "a failed description and a holder without a workflow vouch for nothing")
	var why []string
	for _, c := range res.Closed {
		why = append(why, c.Key.Task+": "+c.Why)
	}
	require.Equal(t, []string{
		"term: workflow karvi-task-term was terminated without releasing its slot",
		"done: workflow karvi-task-done completed without releasing its slot",
		"new: workflow karvi-task-new is another run chain now (first run other, the holder's r4)",
		"gone: workflow karvi-task-gone not found",
	}, why)
}

func askReq(task string) AcquireSlotRequest {
	return AcquireSlotRequest{Pool: "agents", Request: slots.Request{Key: slots.Key{Task: task, Attempt: 1, Chain: "c"},
		Owner: slots.Owner{WorkflowID: "karvi-task-" + task}}}
}

type asked struct {
	ans slots.Answer
	err error
}

// askAll sends n acquires at once, task t00..t<n-1>, and returns their
// outcomes by task once all are in.
func askAll(ctx context.Context, a *Activities, n int) map[string]asked {
	var mu sync.Mutex
	out := map[string]asked{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := askReq(fmt.Sprintf("t%02d", i))
			ans, err := a.acquire(ctx, "q", req)
			mu.Lock()
			out[req.Request.Key.Task] = asked{ans, err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// Acquires arriving together for one pool share an acquire-many update,
// one update under way at a time, each acquire answered from its own
// answer in the result; the pool is started on demand on the worker's
// queue, and every batch has an update id of its own.
func TestAcquiresArrivingTogetherShareOneUpdate(t *testing.T) {
	f := &fakeSlotClient{gate: make(chan struct{})}
	a := &Activities{Temporal: f, BatchWindow: 20 * time.Millisecond}
	go func() {
		// The first batch is held until every acquire has arrived: the
		// rest go in the next update together.
		time.Sleep(200 * time.Millisecond)
		close(f.gate)
	}()
	out := askAll(context.Background(), a, 60)
	require.Len(t, out, 60)
	for task, got := range out {
		require.NoError(t, got.err, task)
		require.Equal(t, slots.Queued, got.ans.State, task)
		require.Equal(t, task, got.ans.Detail, "each acquire gets its own answer")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Empty(t, f.singles, "no acquire went alone")
	// One, or on a busy machine where the goroutines start late, a few
	// while the first is held and one more for the rest.
	require.LessOrEqual(t, len(f.batches), DefaultBatchesInFlight+1, "60 acquires at once in a few updates, got %d", len(f.batches))
	require.LessOrEqual(t, f.mostInFlight, DefaultBatchesInFlight)
	n := 0
	for _, b := range f.batches {
		n += len(b.Requests)
	}
	require.Equal(t, 60, n)
	require.Equal(t, "karvi-slots-agents", f.start.ID)
	require.Equal(t, "q-slot-pools", f.start.TaskQueue, "the pool runs on the pools' queue beside the acquiring worker's")
	require.Equal(t, []any{slotapi.PoolInput{Pool: "agents"}}, f.startArgs)
	if len(f.ids) == 2 {
		require.NotEqual(t, f.ids[0], f.ids[1], "a batch's update id is its own")
	}
}

// Acquires that trickle in go in updates of their own until
// BatchesInFlight are under way; the rest wait together for the next.
func TestNoMoreThanBatchesInFlightUpdatesAtOnce(t *testing.T) {
	f := &fakeSlotClient{gate: make(chan struct{})}
	a := &Activities{Temporal: f, BatchWindow: time.Millisecond}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.acquire(context.Background(), "q", askReq(fmt.Sprintf("t%02d", i)))
			assert.NoError(t, err)
		}()
		time.Sleep(5 * time.Millisecond)
	}
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.batches) == DefaultBatchesInFlight },
		5*time.Second, time.Millisecond)
	// Every acquire has arrived: the ones not under way wait in line.
	require.Eventually(t, func() bool {
		a.batch.mu.Lock()
		defer a.batch.mu.Unlock()
		n := 0
		for _, l := range a.batch.lines {
			n += len(l.pending)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		sent := 0
		for _, b := range f.batches {
			sent += len(b.Requests)
		}
		return n+sent == 30
	}, 5*time.Second, time.Millisecond)
	f.mu.Lock()
	require.Len(t, f.batches, DefaultBatchesInFlight, "no fifth update while four are under way")
	sent := 0
	for _, b := range f.batches {
		sent += len(b.Requests)
	}
	f.mu.Unlock()
	close(f.gate)
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, DefaultBatchesInFlight, f.mostInFlight)
	require.Len(t, f.batches, DefaultBatchesInFlight+1, "the rest went together")
	require.Len(t, f.batches[DefaultBatchesInFlight].Requests, 30-sent)
}

// An acquire-many update that fails fails every acquire in it, and each
// asks again alone, by the acquire update whose id is its key's: a pool
// on a worker that does not know acquire-many still answers.
func TestAFailedBatchAsksEachAcquireAgainAlone(t *testing.T) {
	f := &fakeSlotClient{answer: slots.Answer{State: slots.Granted},
		many: func(slotapi.AcquireMany) (slotapi.AcquireManyResult, error) {
			return slotapi.AcquireManyResult{}, temporal.NewApplicationError("unknown update acquire-many. KnownUpdates=[acquire set]", "")
		}}
	a := &Activities{Temporal: f}
	out := askAll(context.Background(), a, 12)
	for task, got := range out {
		require.NoError(t, got.err, task)
		require.Equal(t, slots.Granted, got.ans.State, task)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.batches)
	require.Len(t, f.singles, 12, "every acquire of the failed batch asked again alone")

	// An answer that does not match the batch fails it the same way.
	f.many = func(slotapi.AcquireMany) (slotapi.AcquireManyResult, error) { return slotapi.AcquireManyResult{}, nil }
	f.singles = nil
	f.mu.Unlock()
	out = askAll(context.Background(), a, 3)
	f.mu.Lock()
	require.Len(t, f.singles, 3)
	for _, got := range out {
		require.NoError(t, got.err)
	}
}

// An acquire whose activity ends while it waits for its batch returns at
// once with its context's error, and is left out of a batch not sent yet;
// the others are answered.
func TestAnAcquireThatEndsIsLeftOutOfItsBatch(t *testing.T) {
	f := &fakeSlotClient{gate: make(chan struct{})}
	a := &Activities{Temporal: f, BatchWindow: time.Millisecond, BatchesInFlight: 1}
	first := make(chan asked, 1)
	go func() {
		ans, err := a.acquire(context.Background(), "q", askReq("first"))
		first <- asked{ans, err}
	}()
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.batches) == 1 }, 5*time.Second, time.Millisecond)
	// "first"'s update is under way and held: these two wait for the next.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := a.acquire(ctx, "q", askReq("gone"))
		gone <- err
	}()
	second := make(chan asked, 1)
	go func() {
		ans, err := a.acquire(context.Background(), "q", askReq("second"))
		second <- asked{ans, err}
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-gone:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled acquire still waits for its batch")
	}
	close(f.gate)
	got := <-first
	require.NoError(t, got.err)
	require.Equal(t, "first", got.ans.Detail)
	got = <-second
	require.NoError(t, got.err)
	require.Equal(t, "second", got.ans.Detail)
	require.Equal(t, 1, got.ans.Position, "the cancelled acquire was not sent")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.batches, 2)
	require.Len(t, f.batches[1].Requests, 1)
	require.Equal(t, "second", f.batches[1].Requests[0].Key.Task)
}

// A malformed acquire is refused on the worker, finally, without an
// update; one the pool refuses in a batch is refused the same way.
func TestAMalformedAcquireInABatchIsRefusedAlone(t *testing.T) {
	f := &fakeSlotClient{many: func(m slotapi.AcquireMany) (slotapi.AcquireManyResult, error) {
		return slotapi.AcquireManyResult{Answers: []slotapi.ManyAnswer{{Error: "key: chain is 65 bytes, at most 64"}}}, nil
	}}
	a := &Activities{Temporal: f}
	_, err := a.acquire(context.Background(), "q", AcquireSlotRequest{Pool: "agents", Request: slots.Request{Key: slots.Key{Task: "T1"}}})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrBadSlotRequest, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, err.Error(), "attempt 0 must be at least 1")

	_, err = a.acquire(context.Background(), "q", askReq("T2"))
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrBadSlotRequest, app.Type())
	require.Contains(t, err.Error(), "chain is 65 bytes")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.batches, 1, "the first never left the worker")
}

// A pool a worker starts runs at the worker's time scale; at real time
// its input is what it always was.
func TestAPoolStartsAtTheWorkersTimeScale(t *testing.T) {
	require.Equal(t, slotapi.PoolInput{Pool: "p"}, (&Activities{}).poolInput("p"))
	require.Equal(t, slotapi.PoolInput{Pool: "p"}, (&Activities{Scale: 1}).poolInput("p"))
	require.Equal(t, slotapi.PoolInput{Pool: "p", TimeScale: 60}, (&Activities{Scale: 60}).poolInput("p"))
}
