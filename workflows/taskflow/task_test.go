package taskflow

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/wfstart"
)

// fakeConductor plays a recorded event log to the workflow through mocked
// activities, and records everything the workflow sends to the sink.
type fakeConductor struct {
	mu       sync.Mutex
	t        *testing.T
	events   []mapping.Event // the log, in order
	perBatch int             // events handed out per TailEvents call
	// exitAfter: once every event was read the conductor is reported exited
	// with this state (nil state = the process just vanished).
	exitAfterAll bool
	exitState    *mapping.ConductorState
	exitCode     int
	// hang: TailEvents never returns events, only waits (testsuite time).
	hang bool
	// tailHeartbeat is what each delivery reports as its worker's
	// heartbeat timeout (zero: none, an older worker).
	tailHeartbeat time.Duration
	// prepareAfter delays PreparePlan (testsuite time); statusAfter each
	// status write.
	prepareAfter, statusAfter time.Duration
	timeoutSec                int // the plan's timeout_sec; 600 when 0

	starts, aborts, live, maxLive int
	// stopped: the current conductor was aborted; a delivery then reads the
	// log to its end and reports it exited, as the real one does.
	stopped  bool
	prepared []taskact.PrepareRequest
	patches  [][]byte
	statuses []taskact.TaskStatusUpdate
	patchErr error
	// timeline is every patch (by type) and status write, in order.
	timeline []string
	// streams, when set, stores what the activities' requests carry for
	// the task's event stream, as the real ones do (stream_test.go).
	streams *streamFake
	// afterDeliver, when set, may fail a delivery after it delivered and
	// stored its events, as a worker lost at that moment does.
	afterDeliver func() error
	// hostOf, when set, names the host a started attempt runs on; gone,
	// when set, may fail a delivery or a stop before it runs, as an
	// activity no host took does (fleet_test.go).
	hostOf func(attempt int) string
	gone   func(ctx context.Context) error
	// claimOf, when set, names the host the n-th claim gets (else hostOf
	// the attempt's); startGone may fail a start before it runs, and
	// startFails fails that many first tries of a start after it ran, as
	// a try timed out on a loaded host does.
	claimOf    func(n int) string
	startGone  func(ctx context.Context) error
	startFails int
	claims     int
	claimed    string
	// nonceNames names plans as the real PreparePlan does, with the
	// chain's nonce (identity_test.go); the golden briefs have none.
	nonceNames bool
}

func (f *fakeConductor) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivity(acts)
	f.registerDelivery(env)
	env.OnActivity(acts.PreparePlan, mock.Anything, mock.Anything).After(f.prepareAfter).Return(
		func(_ context.Context, req taskact.PrepareRequest) (taskact.PlanInfo, error) {
			return f.prepare(req)
		})
	env.OnActivity(acts.StartConductor, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.StartRequest) (taskact.ConductorHandle, error) {
			return f.start(), nil
		})
	env.OnActivity(acts.AbortConductor, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req taskact.AbortRequest) error {
			if f.gone != nil {
				if err := f.gone(ctx); err != nil {
					return err
				}
			}
			f.streams.steps(req.Stream)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.aborts++
			if !f.stopped {
				f.live--
			}
			f.stopped = true
			return nil
		})
	// Each poll takes a second of workflow time: the test environment skips
	// it, and a silent conductor still lets the workflow clock advance.
	env.OnActivity(acts.TailEvents, mock.Anything, mock.Anything).After(time.Second).Return(
		func(ctx context.Context, req taskact.TailRequest) (taskact.TailResult, error) {
			return f.tail(ctx, req)
		})
	env.OnActivity(acts.PatchBrief, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.PatchRequest) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.patchErr != nil {
				return f.patchErr
			}
			for _, p := range req.Patches {
				f.patches = append(f.patches, p.Body)
				f.timeline = append(f.timeline, "patch "+p.Type)
			}
			return nil
		})
	env.OnActivity(acts.SetTaskStatus, mock.Anything, mock.Anything).After(f.statusAfter).Return(
		func(_ context.Context, req taskact.StatusRequest) error {
			f.streams.steps(req.Stream)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.statuses = append(f.statuses, req.Update)
			f.timeline = append(f.timeline, "status "+string(req.Update.Status))
			return nil
		})
}

func (f *fakeConductor) prepare(req taskact.PrepareRequest) (taskact.PlanInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prepared = append(f.prepared, req)
	if err := req.Dispatch.Validate(); err != nil {
		return taskact.PlanInfo{}, err
	}
	name := mapping.PlanName(req.Dispatch.TaskID, req.Attempt) // the golden briefs' names
	if f.nonceNames {
		name = mapping.AttemptPlanName(req.Dispatch.TaskID, req.Attempt, req.Nonce)
	}
	return taskact.PlanInfo{
		Summary: mapping.PlanSummary{Name: name, PhaseIDs: []string{"implement", "test", "docs"},
			TimeoutSec: f.planTimeout(), MaxAttempts: 3},
		PlanPath: "/work/runs/" + name + "/plan.yaml", Cwd: "/work/tasks/x", RunDir: "/work/runs/" + name,
		EventsPath: "/events", StatePath: "/state",
	}, nil
}

func (f *fakeConductor) start() taskact.ConductorHandle {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	f.live++
	f.stopped = false
	if f.live > f.maxLive {
		f.maxLive = f.live
	}
	return taskact.ConductorHandle{PID: 1000 + f.starts, PGID: 1000 + f.starts}
}

// registerDelivery mocks the activities of delivery in the tail with the
// same recorded log: StartAttempt is PreparePlan, the skeleton, the
// dispatched status and StartConductor; DeliverEvents is a poll whose
// events are reduced and sent as the real one does.
func (f *fakeConductor) registerDelivery(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(acts.ClaimHost, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.ClaimHostRequest) (taskact.ClaimHostResult, error) {
			f.claims++
			switch {
			case f.claimOf != nil:
				f.claimed = f.claimOf(f.claims)
			case f.hostOf != nil:
				f.claimed = f.hostOf(req.Attempt)
			}
			return taskact.ClaimHostResult{Host: f.claimed}, nil
		})
	env.OnActivity(acts.StartAttempt, mock.Anything, mock.Anything).After(f.prepareAfter).Return(
		func(ctx context.Context, req taskact.StartAttemptRequest) (taskact.StartAttemptResult, error) {
			if f.startGone != nil {
				if err := f.startGone(ctx); err != nil {
					return taskact.StartAttemptResult{}, err
				}
			}
			info, err := f.prepare(taskact.PrepareRequest{Dispatch: req.Dispatch, Attempt: req.Attempt, Nonce: req.Nonce})
			if err != nil {
				return taskact.StartAttemptResult{}, err
			}
			if f.startFails > 0 {
				f.startFails--
				return taskact.StartAttemptResult{}, errors.New("activity heartbeat timeout (test)")
			}
			f.streams.steps(req.Stream)
			res := taskact.StartAttemptResult{Plan: info}
			switch {
			case f.claims > 0:
				res.Host = f.claimed
			case f.hostOf != nil:
				res.Host = f.hostOf(req.Attempt)
			}
			brief := mapping.NewBriefState(req.Dispatch.TaskID, info.Summary)
			var enc mapping.BriefEncoder
			if err := f.send(enc.Init(&brief)); err != nil {
				res.SinkProblem = err.Error()
			}
			u := req.Base
			u.Status = mapping.TaskDispatched
			f.status(u)
			h := f.start()
			res.Conductor = &h
			d, err := f.deliver(ctx, taskact.DeliverRequest{TaskID: req.Dispatch.TaskID, Plan: info, Handle: h,
				Brief: brief, TaskStatus: mapping.TaskDispatched, Base: u, MaxWait: req.MaxWait, Stream: withoutSteps(req.Stream)})
			if err != nil {
				return taskact.StartAttemptResult{}, err
			}
			if res.SinkProblem == "" {
				d.Patches++ // the skeleton
			}
			res.Delivery = &d
			return res, nil
		})
	env.OnActivity(acts.DeliverEvents, mock.Anything, mock.Anything).After(time.Second).Return(
		func(ctx context.Context, req taskact.DeliverRequest) (taskact.DeliverResult, error) {
			if f.gone != nil {
				if err := f.gone(ctx); err != nil {
					return taskact.DeliverResult{}, err
				}
			}
			res, err := f.deliver(ctx, req)
			if err == nil && f.afterDeliver != nil {
				err = f.afterDeliver()
			}
			return res, err
		})
}

// deliver is DeliverEvents on the recorded log: a poll whose events are
// reduced and sent as the real one does.
func (f *fakeConductor) deliver(ctx context.Context, req taskact.DeliverRequest) (taskact.DeliverResult, error) {
	stored := f.streams.steps(req.Stream)
	tr, err := f.tail(ctx, taskact.TailRequest{Cursor: req.Cursor, MaxWait: req.MaxWait})
	if err != nil {
		return taskact.DeliverResult{}, err
	}
	res := taskact.DeliverResult{Next: tr.Next, Malformed: tr.Malformed, ConductorEnd: tr.ConductorEnd,
		Stream: f.streams.conductor(req, tr.Events, stored)}
	st := req.Brief.Clone()
	var enc mapping.BriefEncoder
	status := req.TaskStatus
	for _, ev := range tr.Events {
		res.Events++
		if c, ok := st.Reduce(ev); ok {
			if err := f.send(enc.Patch(&st, c)); err != nil {
				res.SinkProblem = err.Error()
			} else {
				res.Patches++
			}
		}
		if ev.Type == mapping.EventPhaseStart && status != mapping.TaskInProgress && res.Outcome == nil {
			u := req.Base
			u.Status = mapping.TaskInProgress
			f.status(u)
			status, res.TaskStatus = u.Status, u.Status
		}
		if o, ok := mapping.OutcomeFromEvent(ev, st); ok && res.Outcome == nil {
			res.Outcome = &o
		}
	}
	res.Brief = st
	res.Job = fakeTally(req, tr.Events)
	res.TailHeartbeat = f.tailHeartbeat
	return res, nil
}

func (f *fakeConductor) send(p mapping.Patch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.patchErr != nil {
		return f.patchErr
	}
	f.patches = append(f.patches, p.Body)
	f.timeline = append(f.timeline, "patch "+p.Type)
	return nil
}

func (f *fakeConductor) status(u taskact.TaskStatusUpdate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses = append(f.statuses, u)
	f.timeline = append(f.timeline, "status "+string(u.Status))
}

func (f *fakeConductor) planTimeout() int {
	if f.timeoutSec > 0 {
		return f.timeoutSec
	}
	return 600
}

func (f *fakeConductor) tail(ctx context.Context, req taskact.TailRequest) (taskact.TailResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hang && req.MaxWait > 0 && !f.stopped {
		return taskact.TailResult{Next: req.Cursor}, nil
	}
	i := int(req.Cursor.Offset)
	n := f.perBatch
	if n <= 0 {
		n = 1
	}
	if req.MaxWait == 0 || f.stopped {
		n = len(f.events) // a drain reads everything
	}
	end := min(i+n, len(f.events))
	res := taskact.TailResult{Next: taskact.TailCursor{Offset: int64(end)}}
	for _, ev := range f.events[i:end] {
		ev.Pos = mapping.Position{Offset: int64(i)}
		res.Events = append(res.Events, ev)
		i++
	}
	if end == len(f.events) && (f.exitAfterAll || req.MaxWait == 0 || f.stopped) {
		res.Exited = true
		res.ExitCode = f.exitCode
		res.State = f.exitState
		if res.State == nil {
			res.StateError = "state.json missing"
		}
	}
	return res, nil
}

func loadEvents(t *testing.T, path string) []mapping.Event {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var evs []mapping.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ev, err := mapping.ParseEvent(sc.Bytes())
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	require.NoError(t, sc.Err())
	return evs
}

func exampleDispatch(t *testing.T) mapping.DispatchPlan {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", "A", "dispatch.json"))
	require.NoError(t, err)
	d, err := mapping.ParseDispatchPlan(data)
	require.NoError(t, err)
	return d
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TaskWorkflow, workflow.RegisterOptions{Name: taskapi.TaskWorkflowName})
	return env
}

func statusNames(us []taskact.TaskStatusUpdate) []string {
	var out []string
	for _, u := range us {
		out = append(out, string(u.Status))
	}
	return out
}

func TestHappyPathMatchesExampleA(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1}
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))

	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.EqualValues(t, "completed", res.Outcome.DispatchState)
	require.Equal(t, 1, f.starts)
	require.Equal(t, []string{"dispatched", "in_progress", "completed"}, statusNames(f.statuses))

	// The PATCHes after the skeleton are exactly the golden sequence.
	want := readLines(t, "../../testdata/examples/A/patches.jsonl")
	require.Len(t, f.patches, len(want)+1, "skeleton patch + one per event")
	for i, w := range want {
		require.JSONEq(t, w, string(f.patches[i+1]), "patch %d", i+1)
	}
	wantBrief, err := os.ReadFile("../../testdata/examples/A/brief.json")
	require.NoError(t, err)
	got, err := json.Marshal(res.Brief)
	require.NoError(t, err)
	require.JSONEq(t, string(wantBrief), string(got))
}

// runExampleB runs example B: a phase fails its check three times and the
// conductor exits with state.json saying so, writing no terminal event.
func runExampleB(t *testing.T) (*testsuite.TestWorkflowEnvironment, *fakeConductor) {
	t.Helper()
	env := newEnv(t)
	stateData, err := os.ReadFile("../../testdata/examples/B/state.json")
	require.NoError(t, err)
	cs, err := mapping.ParseConductorState(stateData)
	require.NoError(t, err)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/B/events.snake.jsonl"),
		perBatch: 3, exitAfterAll: true, exitState: &cs}
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	return env, f
}

func TestRetriesExhaustedBlocksWithoutTerminalEvent(t *testing.T) {
	env, f := runExampleB(t)
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))

	var want mapping.Outcome
	data, err := os.ReadFile("../../testdata/examples/B/terminal.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &want))
	require.Equal(t, want, res.Outcome)
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	last := f.statuses[len(f.statuses)-1]
	require.Equal(t, mapping.TaskBlocked, last.Status)
	require.Equal(t, want.BlockerReason, last.Reason)
	require.Equal(t, want.LastError, last.LastError)
	require.NotEmpty(t, last.AskedAt)
}

func TestInvalidDispatchFailsBeforeAnythingStarts(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t}
	f.register(env)
	d := exampleDispatch(t)
	d.TaskID = "../etc"
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: d})
	err := env.GetWorkflowError()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.True(t, appErr.NonRetryable())
	require.Equal(t, activities.ErrInvalidDispatch, appErr.Type())
	require.Contains(t, err.Error(), "taskId")
	require.Empty(t, f.prepared)
	require.Zero(t, f.starts)
}

func TestAbortDuringPhaseStopsConductor(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")[:2], hang: false}
	f.register(env)
	// After the first two events the conductor goes quiet.
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.hang = true
		f.mu.Unlock()
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalAbort, taskapi.AbortSignal{Reason: "user"})
	}, 10*time.Second)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	require.Equal(t, 1, f.starts)
	require.Equal(t, 1, f.aborts)
	require.Equal(t, mapping.TaskBlocked, f.statuses[len(f.statuses)-1].Status)
	require.Equal(t, "Plan aborted by user", f.statuses[len(f.statuses)-1].Reason)
}

// An abort that is already there when the workflow begins starts nothing.
func TestAbortBeforeTheAttemptStartsStartsNothing(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t}
	f.register(env)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalAbort, nil) }, 0)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	require.Zero(t, f.starts, "no conductor may start after an abort")
}

// An attempt starts in one activity (plan, skeleton, status, conductor);
// an abort that arrives meanwhile stops the conductor it started.
func TestAbortWhileTheAttemptStartsStopsItsConductor(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, prepareAfter: 5 * time.Second, hang: true}
	f.register(env)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalAbort, nil) }, time.Second)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	require.LessOrEqual(t, f.starts, 1)
	require.Zero(t, f.live, "the started conductor was stopped")
}

func TestRedispatchDuringPhaseStartsFreshAttempt(t *testing.T) {
	env := newEnv(t)
	all := loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")
	f := &fakeConductor{t: t, events: all[:2], perBatch: 1}
	f.register(env)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.hang = true
		f.mu.Unlock()
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		// The second attempt runs the whole plan.
		f.mu.Lock()
		f.hang = false
		f.events = all
		f.mu.Unlock()
		env.SignalWorkflow(taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: "try again"})
	}, 10*time.Second)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 2, res.Attempt)
	require.Equal(t, 2, f.starts)
	require.Equal(t, 1, f.aborts)
	require.Equal(t, 1, f.maxLive, "never two live conductors")
	require.Len(t, f.prepared, 2)
	require.Equal(t, 2, f.prepared[1].Attempt)
	require.Equal(t, "redispatch", f.prepared[1].Dispatch.Mode)
	require.NotEqual(t, mapping.PlanName("T5", 1), res.PlanName)
	require.Equal(t, "redispatched", res.Attempts[0].Ended)
}

func TestSignalStormEndsInOneDecision(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")[:2]}
	f.register(env)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.hang = true
		f.mu.Unlock()
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		for i := 0; i < 100; i++ {
			if i%2 == 0 {
				env.SignalWorkflow(taskapi.SignalRedispatch, nil)
			} else {
				env.SignalWorkflow(taskapi.SignalAbort, nil)
			}
		}
	}, 10*time.Second)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	// Abort wins over redispatch within a burst.
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	require.LessOrEqual(t, f.maxLive, 1)
	require.Equal(t, f.starts, f.aborts, "every started conductor was stopped")
}

func TestSilentConductorTimesOut(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")[:2], timeoutSec: 30}
	f.register(env)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.hang = true
		f.mu.Unlock()
	}, time.Second)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t),
		Tuning: &taskapi.Tuning{SilenceGrace: time.Second}})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Equal(t, "Phase implement timed out", res.Outcome.LastError)
	require.Equal(t, 1, f.aborts)
}

func TestConductorCrashWithoutStateIsBlocked(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")[:4],
		exitAfterAll: true, exitCode: 3}
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Contains(t, res.Outcome.LastError, "test")
	require.Contains(t, res.Outcome.LastError, "code 3")
}

func TestMissingBriefKeepsRunningAndIsVisible(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"),
		perBatch: 4, patchErr: temporal.NewNonRetryableApplicationError("no brief for this task", taskact.ErrNoBrief, nil)}
	f.register(env)
	// Asked as soon as the workflow runs, as the Web UI may: counted from
	// the environment's start, the query could come before the workflow
	// function began (wfstart's doc says why).
	var mid taskapi.Status
	wfstart.Install(env).After(0, func() {
		v, err := env.QueryWorkflow(taskapi.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&mid))
	})
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 3, res.Brief.CompletedPhases, "the brief is kept in the workflow")
	v, err := env.QueryWorkflow(taskapi.QueryStatus)
	require.NoError(t, err)
	var st taskapi.Status
	require.NoError(t, v.Get(&st))
	require.Contains(t, st.SinkProblem, "no brief for this task")
	// Before the first write to the brief there was nothing to tell.
	require.Equal(t, "T5", mid.TaskID)
	require.Equal(t, taskapi.StagePrepare, mid.Stage)
	require.Empty(t, mid.SinkProblem)
}

func TestContinueAsNewCarriesState(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1}
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t),
		Tuning: &taskapi.Tuning{ContinueAsNewAfterPolls: 3}})
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "expected continue-as-new, got %v", err)
	var next taskapi.TaskInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotEmpty(t, next.Resume)
	require.Empty(t, next.Carry, "the old shape is never written")
	var resumed State
	require.NoError(t, json.Unmarshal(next.Resume, &resumed))
	cur := resumed.Current
	require.Equal(t, taskapi.StageRunning, cur.Stage)
	require.NotNil(t, cur.Conductor, "the running conductor is carried, not restarted")
	require.Positive(t, resumed.Counts.EventsApplied)
	require.Equal(t, resumed.Counts.EventsApplied, cur.Events)
	require.Equal(t, int64(cur.Events), cur.Cursor.Offset)

	// The continued run picks up at the cursor and finishes the task without
	// a second conductor (the knob is lifted so it runs to the end).
	resumed.Tuning = nil
	next.Resume, err = json.Marshal(resumed)
	require.NoError(t, err)
	res := runToEnd(t, f, next)
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus)
	require.Equal(t, 1, f.starts)
	want := readLines(t, "../../testdata/examples/A/patches.jsonl")
	require.Len(t, f.patches, len(want)+1, "no patch lost or doubled across continue-as-new")
	require.Len(t, res.Attempts, 1)
	require.Equal(t, len(f.events), res.Attempts[0].Events)
}

// A run continued-as-new by the workflow code before the attempt became a
// value of its own hands over the flat record; the run converts it and
// finishes the task as if it had never stopped.
func TestContinueAsNewFromTheOldShape(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1}
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t),
		Tuning: &taskapi.Tuning{ContinueAsNewAfterPolls: 3}})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can))
	var next taskapi.TaskInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	var st State
	require.NoError(t, json.Unmarshal(next.Resume, &st))
	cur := st.Current
	old := &stateV1{
		Dispatch: st.Dispatch, Attempt: cur.N, Stage: cur.Stage, Plan: cur.Plan, Handle: cur.Conductor,
		Cursor: cur.Cursor, Brief: cur.Brief, TaskStatus: st.TaskStatus, LastEventAt: cur.LastEventAt,
		EventsApplied: st.Counts.EventsApplied, PatchesSent: st.Counts.PatchesSent,
		SignalsReceived: st.Signals.Received, ContinuedAsNew: st.ContinuedAsNew,
	}
	// Through JSON, as the server hands it over.
	data, err := json.Marshal(map[string]any{"dispatch": next.Dispatch, "carry": old})
	require.NoError(t, err)
	var in taskapi.TaskInput
	require.NoError(t, json.Unmarshal(data, &in))
	require.NotEmpty(t, in.Carry)
	require.Empty(t, in.Resume)

	res := runToEnd(t, f, in)
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus)
	require.Equal(t, 1, f.starts, "the carried conductor is re-attached, not restarted")
	want := readLines(t, "../../testdata/examples/A/patches.jsonl")
	require.Len(t, f.patches, len(want)+1, "no patch lost or doubled across the conversion")
	wantBrief, err := os.ReadFile("../../testdata/examples/A/brief.json")
	require.NoError(t, err)
	got, err := json.Marshal(res.Brief)
	require.NoError(t, err)
	require.JSONEq(t, string(wantBrief), string(got))
}

func runToEnd(t *testing.T, f *fakeConductor, in taskapi.TaskInput) taskapi.Result {
	t.Helper()
	env := newEnv(t)
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			out = append(out, sc.Text())
		}
	}
	require.NoError(t, sc.Err())
	return out
}
