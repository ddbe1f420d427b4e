package taskflow

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/slotact"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/slots"
)

// fakePool stands in for a slot pool's workflow: it answers the task's
// acquires as scripted and records what the task asked and gave back.
type fakePool struct {
	mu sync.Mutex
	// answers are the acquire answers, one per call in order; the last
	// repeats.
	answers  []slots.Answer
	acquires []slotact.AcquireSlotRequest
	releases []string // "<task>#<attempt> <reason>"
	// releasedAt is when each release was sent.
	releasedAt []time.Time
}

func (p *fakePool) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivity(slotActs)
	env.OnActivity(slotActs.AcquireSlot, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req slotact.AcquireSlotRequest) (slots.Answer, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.acquires = append(p.acquires, req)
			return p.answers[min(len(p.acquires), len(p.answers))-1], nil
		})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", slotapi.SignalRelease, mock.Anything).Return(
		func(_, workflowID, _, _ string, arg any) error {
			s := arg.(slotapi.ReleaseSignal)
			p.mu.Lock()
			defer p.mu.Unlock()
			p.releases = append(p.releases, strings.TrimPrefix(workflowID, "karvi-slots-")+": "+s.Key.Task+"#"+string(rune('0'+s.Key.Attempt))+" "+s.Reason)
			p.releasedAt = append(p.releasedAt, env.Now())
			return nil
		})
}

func (p *fakePool) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, a := range p.acquires {
		out = append(out, a.Pool+": "+a.Request.Key.Task+"#"+string(rune('0'+a.Request.Key.Attempt)))
	}
	return out
}

func notice(pool, task string, attempt int, a slots.Answer) slotapi.Notice {
	return slotapi.Notice{Pool: pool, Notice: slots.Notice{Key: slots.Key{Task: task, Attempt: attempt}, Answer: a}}
}

func slotInput(t *testing.T, s *taskapi.SlotRequest) taskapi.TaskInput {
	return taskapi.TaskInput{Dispatch: exampleDispatch(t), Slots: s}
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) taskapi.Status {
	t.Helper()
	v, err := env.QueryWorkflow(taskapi.QueryStatus)
	require.NoError(t, err)
	var s taskapi.Status
	require.NoError(t, v.Get(&s))
	return s
}

// A task that names a pool waits in line before its conductor starts, says
// so in its status and details, starts once granted, and gives the slot
// back when the attempt ends.
func TestTaskWaitsForASlotThenGivesItBack(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 100}
	f.register(env)
	p := &fakePool{answers: []slots.Answer{{State: slots.Queued, Position: 2}}}
	p.register(env)
	env.RegisterDelayedCallback(func() {
		s := queryStatus(t, env)
		require.Equal(t, taskapi.StagePrepare, s.Stage)
		require.Equal(t, &taskapi.SlotStatus{Pool: "agents", State: "waiting", Position: 2, Since: s.Slot.Since}, s.Slot)
		require.Zero(t, f.starts, "no conductor before the grant")
		require.Contains(t, renderDetails(&State{Dispatch: exampleDispatch(t), Current: Attempt{N: 1, Stage: taskapi.StagePrepare,
			Slot: &SlotHold{Pool: "agents", Position: 2, Since: s.Slot.Since}}}), "Waiting for a slot (position 2 in pool agents)")
		env.SignalWorkflow(slotapi.SignalSlot, notice("agents", "T5", 2, slots.Answer{State: slots.Granted})) // another attempt's: ignored
		env.SignalWorkflow(slotapi.SignalSlot, notice("other", "T5", 1, slots.Answer{State: slots.Granted}))  // another pool's: ignored
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Zero(t, f.starts, "stale notices grant nothing")
		env.SignalWorkflow(slotapi.SignalSlot, notice("agents", "T5", 1, slots.Answer{State: slots.Granted}))
	}, 2*time.Minute)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, slotInput(t, &taskapi.SlotRequest{}))
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus)
	require.Equal(t, 1, f.starts)
	require.Equal(t, []string{"agents: T5#1"}, p.asked())
	require.Equal(t, []string{"agents: T5#1 completed"}, p.releases)
	require.Equal(t, "default-test-workflow-id", p.acquires[0].Request.Owner.WorkflowID, "the pool tells the task's own workflow")
}

func TestTaskRefusedASlotEndsBlockedWithTheReason(t *testing.T) {
	cases := []struct {
		name   string
		req    taskapi.SlotRequest
		answer slots.Answer
		notice *slots.Answer
		want   string
	}{
		{name: "timeout", req: taskapi.SlotRequest{Timeout: 10 * time.Minute},
			answer: slots.Answer{State: slots.Queued, Position: 1},
			notice: &slots.Answer{State: slots.Refused, Reason: slots.ReasonTimeout, Detail: "waited 10m0s in line"},
			want:   "no agent slot in pool agents within 10m: timeout"},
		{name: "max_total", req: taskapi.SlotRequest{Pool: "gpu", Run: "r"},
			answer: slots.Answer{State: slots.Refused, Reason: slots.ReasonMaxTotal, Detail: "run r was granted 10 slots, max_total is 10"},
			want:   "no agent slot in pool gpu: max_total (run r was granted 10 slots, max_total is 10)"},
		{name: "no wait", req: taskapi.SlotRequest{NoWait: true},
			answer: slots.Answer{State: slots.Refused, Reason: slots.ReasonMaxConcurrent, Detail: "all 4 slots are held"},
			want:   "no agent slot in pool agents: max_concurrent (all 4 slots are held)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			f := &fakeConductor{t: t}
			f.register(env)
			p := &fakePool{answers: []slots.Answer{c.answer}}
			p.register(env)
			if c.notice != nil {
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(slotapi.SignalSlot, notice(c.req.PoolOrDefault(), "T5", 1, *c.notice))
				}, c.req.Timeout)
			}
			env.ExecuteWorkflow(taskapi.TaskWorkflowName, slotInput(t, &c.req))
			require.NoError(t, env.GetWorkflowError())
			var res taskapi.Result
			require.NoError(t, env.GetWorkflowResult(&res))
			require.Equal(t, mapping.TaskBlocked, res.Outcome.TaskStatus)
			require.Equal(t, c.want, res.Outcome.LastError)
			require.Equal(t, c.want, res.Outcome.BlockerReason)
			require.Zero(t, f.starts)
			require.Empty(t, p.releases, "a refused request has nothing to give back")
			last := f.statuses[len(f.statuses)-1]
			require.Equal(t, mapping.TaskBlocked, last.Status)
			require.Equal(t, c.want, last.Reason)
		})
	}
}

// A pool that never answers: the task withdraws from the line once the
// timeout and a grace passed, and ends blocked.
func TestTaskWithdrawsWhenThePoolNeverAnswers(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t}
	f.register(env)
	p := &fakePool{answers: []slots.Answer{{State: slots.Queued, Position: 7}}}
	p.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, slotInput(t, &taskapi.SlotRequest{Timeout: 5 * time.Minute}))
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "no agent slot in pool agents within 5m: timeout", res.Outcome.LastError)
	require.Equal(t, []string{"agents: T5#1 blocked"}, p.releases, "the task takes itself out of line")
	require.Zero(t, f.starts)
}

// At time scale 60 the grace past the timeout is scaled too: a pool that
// never answers is left half a second after the timeout, not 30 s.
func TestTaskWithdrawsAfterTheScaledGrace(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t}
	f.register(env)
	p := &fakePool{answers: []slots.Answer{{State: slots.Queued, Position: 7}}}
	p.register(env)
	var st taskapi.Status
	env.RegisterDelayedCallback(func() { st = queryStatus(t, env) }, time.Minute)
	in := slotInput(t, &taskapi.SlotRequest{Timeout: 5 * time.Minute})
	// Asking the pool again comes later than the withdrawal here.
	in.Tuning = &taskapi.Tuning{TimeScale: 60, SlotAskEvery: time.Hour}
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "no agent slot in pool agents within 5m: timeout", res.Outcome.LastError)
	require.Equal(t, []string{"agents: T5#1 blocked"}, p.releases)
	require.Equal(t, taskapi.SlotWaiting, st.Slot.State)
	require.Equal(t, 5*time.Minute+500*time.Millisecond, p.releasedAt[0].Sub(st.Slot.Since),
		"withdrawn the scaled grace (30 s/60) past the timeout")
}

// An abort while waiting in line starts nothing and leaves the line; a
// redispatch while holding gives the slot back and asks anew for the next
// attempt.
func TestSignalsWhileWaitingOrHolding(t *testing.T) {
	t.Run("abort while waiting", func(t *testing.T) {
		env := newEnv(t)
		f := &fakeConductor{t: t}
		f.register(env)
		p := &fakePool{answers: []slots.Answer{{State: slots.Queued, Position: 3}}}
		p.register(env)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalAbort, taskapi.AbortSignal{Reason: "no"}) }, time.Minute)
		env.ExecuteWorkflow(taskapi.TaskWorkflowName, slotInput(t, &taskapi.SlotRequest{}))
		require.NoError(t, env.GetWorkflowError())
		var res taskapi.Result
		require.NoError(t, env.GetWorkflowResult(&res))
		require.Equal(t, mapping.MsgUserAbort, res.Outcome.LastError)
		require.Zero(t, f.starts)
		require.Equal(t, []string{"agents: T5#1 aborted"}, p.releases)
	})
	t.Run("redispatch while holding", func(t *testing.T) {
		env := newEnv(t)
		f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")[:2]}
		f.register(env)
		p := &fakePool{answers: []slots.Answer{{State: slots.Granted}}}
		p.register(env)
		env.RegisterDelayedCallback(func() {
			f.mu.Lock()
			f.hang = true
			f.mu.Unlock()
		}, time.Second)
		env.RegisterDelayedCallback(func() {
			require.Equal(t, "held", queryStatus(t, env).Slot.State)
			f.mu.Lock()
			f.hang, f.exitAfterAll = false, true
			f.events = loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")
			f.mu.Unlock()
			env.SignalWorkflow(taskapi.SignalRedispatch, taskapi.RedispatchSignal{})
		}, 10*time.Second)
		env.ExecuteWorkflow(taskapi.TaskWorkflowName, slotInput(t, &taskapi.SlotRequest{Pool: "p1"}))
		require.NoError(t, env.GetWorkflowError())
		var res taskapi.Result
		require.NoError(t, env.GetWorkflowResult(&res))
		require.Equal(t, 2, res.Attempt)
		require.Equal(t, []string{"p1: T5#1", "p1: T5#2"}, p.asked())
		require.Equal(t, []string{"p1: T5#1 redispatched", "p1: T5#2 " + string(res.Outcome.TaskStatus)}, p.releases)
		require.Equal(t, 2, f.starts)
	})
}

func TestBadSlotRequestFailsBeforeAnythingStarts(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t}
	f.register(env)
	(&fakePool{}).register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, slotInput(t, &taskapi.SlotRequest{Pool: "no/such"}))
	err := env.GetWorkflowError()
	require.Error(t, err)
	require.Contains(t, err.Error(), `invalid slot request: pool name "no/such"`)
	require.Zero(t, f.starts)
}

// The slot a task holds survives its continue-as-new: the next run does
// not ask again, and gives it back at the end.
func TestSlotHeldAcrossContinueAsNew(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1}
	f.register(env)
	p := &fakePool{answers: []slots.Answer{{State: slots.Granted}}}
	p.register(env)
	in := slotInput(t, &taskapi.SlotRequest{})
	in.Tuning = &taskapi.Tuning{ContinueAsNewAfterPolls: 2}
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, in)
	next := continuedTask(t, env)
	require.NotNil(t, next.Resume)
	require.Empty(t, p.releases, "the slot is held across the hand-over")

	env2 := newEnv(t)
	f.register(env2)
	p.register(env2)
	env2.ExecuteWorkflow(taskapi.TaskWorkflowName, next)
	for env2.GetWorkflowError() != nil {
		next = continuedTask(t, env2)
		env2 = newEnv(t)
		f.register(env2)
		p.register(env2)
		env2.ExecuteWorkflow(taskapi.TaskWorkflowName, next)
	}
	var res taskapi.Result
	require.NoError(t, env2.GetWorkflowResult(&res))
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus)
	require.Equal(t, []string{"agents: T5#1"}, p.asked(), "asked once for the attempt")
	require.Equal(t, []string{"agents: T5#1 completed"}, p.releases)
}

// continuedTask is the input a task workflow continued-as-new with.
func continuedTask(t *testing.T, env *testsuite.TestWorkflowEnvironment) taskapi.TaskInput {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "expected continue-as-new, got %v", env.GetWorkflowError())
	var next taskapi.TaskInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}
