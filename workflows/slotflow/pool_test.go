package slotflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/slotact"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/slots"
	"karvi-edda-temporal/testkit/wfstart"
)

// poolWorld plays the task workflows around a pool in the test
// environment: it sends their acquires and releases, receives the pool's
// notices, and answers the pool's holder checks.
type poolWorld struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	mu  sync.Mutex
	// notices received, "<task>#<attempt> <state>[ <reason>]" in order.
	notices []string
	// answers to acquires, by task.
	answers map[string]slots.Answer
	// closed: these tasks' workflows are gone; signals to them fail, and a
	// check reports them closed.
	closed map[string]bool
	checks int
	// setErrs: each set update's answer, "ok" or the refusal.
	setErrs []string
}

func newPoolWorld(t *testing.T) *poolWorld {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	w := &poolWorld{t: t, env: env, answers: map[string]slots.Answer{}, closed: map[string]bool{}}
	env.RegisterWorkflowWithOptions(SlotPoolWorkflow, workflow.RegisterOptions{Name: slotapi.PoolWorkflowName})
	env.RegisterActivity(slotActs)
	env.OnActivity(slotActs.CheckHolders, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req slotact.CheckHoldersRequest) (slotact.CheckHoldersResult, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.checks++
			var res slotact.CheckHoldersResult
			for _, h := range req.Holders {
				if w.closed[h.Key.Task] {
					res.Closed = append(res.Closed, slotact.ClosedHolder{Key: h.Key, Why: "terminated"})
				} else {
					res.Running = append(res.Running, h.Key)
				}
			}
			return res, nil
		})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", slotapi.SignalSlot, mock.Anything).Return(
		func(_, workflowID, _, _ string, arg any) error {
			n := arg.(slotapi.Notice)
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.closed[n.Key.Task] {
				return fmt.Errorf("workflow %s not found", workflowID)
			}
			s := fmt.Sprintf("%s#%d %s", n.Key.Task, n.Key.Attempt, n.Answer.State)
			if n.Answer.Reason != "" {
				s += " " + string(n.Answer.Reason)
			}
			w.notices = append(w.notices, s)
			return nil
		})
	return w
}

func (w *poolWorld) request(task string, attempt int) slots.Request {
	return slots.Request{Key: slots.Key{Task: task, Attempt: attempt}, Run: "r",
		Owner: slots.Owner{WorkflowID: "karvi-task-" + task, FirstRunID: "first-" + task}}
}

// at runs f after d of workflow time.
func (w *poolWorld) at(d time.Duration, f func()) { w.env.RegisterDelayedCallback(f, d) }

func (w *poolWorld) acquire(r slots.Request) {
	w.env.UpdateWorkflow(slotapi.UpdateAcquire, fmt.Sprintf("acquire/%s/%d", r.Key.Task, r.Key.Attempt), &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { w.t.Errorf("acquire %s rejected: %v", r.Key, err) },
		OnComplete: func(v any, err error) {
			require.NoError(w.t, err)
			w.mu.Lock()
			defer w.mu.Unlock()
			w.answers[r.Key.Task] = v.(slots.Answer)
		},
	}, r)
}

func (w *poolWorld) release(task string, attempt int) {
	w.env.SignalWorkflow(slotapi.SignalRelease, slotapi.ReleaseSignal{Key: slots.Key{Task: task, Attempt: attempt}, Reason: "done"})
}

// set sends a set update; its answer is in w.setErrs once the pool took it.
func (w *poolWorld) set(req slotapi.SetRequest) {
	done := func(err error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		msg := "ok"
		if err != nil {
			msg = err.Error()
		}
		w.setErrs = append(w.setErrs, msg)
	}
	w.env.UpdateWorkflow(slotapi.UpdateSet, "", &testsuite.TestUpdateCallback{
		OnAccept:   func() {},
		OnReject:   done,
		OnComplete: func(_ any, err error) { done(err) },
	}, req)
}

func (w *poolWorld) view() slotapi.View {
	v, err := w.env.QueryWorkflow(slotapi.QuerySlots)
	require.NoError(w.t, err)
	var out slotapi.View
	require.NoError(w.t, v.Get(&out))
	return out
}

func (w *poolWorld) taken() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.notices...)
}

func holderTasks(v slotapi.View) []string {
	var out []string
	for _, h := range v.Holders {
		out = append(out, h.Task)
	}
	return out
}

func waiterTasks(v slotapi.View) []string {
	var out []string
	for _, x := range v.Waiters {
		out = append(out, fmt.Sprintf("%d:%s", x.Position, x.Task))
	}
	return out
}

// continued returns the input of the run a pool continued-as-new into.
func continued(t *testing.T, env *testsuite.TestWorkflowEnvironment) slotapi.PoolInput {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "the pool should have continued as new, got %v", env.GetWorkflowError())
	require.Equal(t, slotapi.PoolWorkflowName, can.WorkflowType.Name)
	var in slotapi.PoolInput
	require.NoError(t, json.Unmarshal(can.Input.Payloads[0].Data, &in))
	return in
}

func TestSlotPoolGrantsInOrderAcrossContinueAsNew(t *testing.T) {
	w := newPoolWorld(t)
	w.at(time.Second, func() {
		for _, task := range []string{"a", "b", "c", "d", "e"} {
			w.acquire(w.request(task, 1))
		}
	})
	w.at(2*time.Second, func() {
		require.Equal(t, slots.Answer{State: slots.Granted, Since: w.answers["a"].Since}, w.answers["a"])
		require.Equal(t, slots.Queued, w.answers["e"].State)
		require.Equal(t, 3, w.answers["e"].Position)
		w.acquire(w.request("c", 1)) // asked again: the same place
		w.release("a", 1)
	})
	w.at(3*time.Second, func() {
		require.Equal(t, 1, w.answers["c"].Position, "a repeated acquire answers the place it had")
		require.Equal(t, []string{"c#1 granted"}, w.taken(), "a released slot goes to the first waiter")
		v := w.view()
		require.Equal(t, []string{"b", "c"}, holderTasks(v))
		require.Equal(t, []string{"1:d", "2:e"}, waiterTasks(v))
		w.env.SetContinueAsNewSuggested(true)
		w.release("zz", 1) // wakes the pool, which then hands over
	})
	w.env.ExecuteWorkflow(slotapi.PoolWorkflowName, slotapi.PoolInput{Pool: "agents", Limits: &slots.Limits{MaxConcurrent: 2}})
	in := continued(t, w.env)
	require.Equal(t, "agents", in.Pool)

	// The next run starts from the handed-over state: nobody lost.
	w2 := newPoolWorld(t)
	w2.at(time.Second, func() {
		v := w2.view()
		require.Equal(t, []string{"b", "c"}, holderTasks(v))
		require.Equal(t, []string{"1:d", "2:e"}, waiterTasks(v))
		require.Equal(t, 1, v.ContinuedAsNew)
		require.Equal(t, 2, v.Limits.MaxConcurrent)
		w2.release("b", 1)
	})
	w2.at(2*time.Second, func() {
		require.Equal(t, []string{"d#1 granted"}, w2.taken())
		w2.acquire(w2.request("f", 1))
	})
	w2.at(3*time.Second, func() {
		require.Equal(t, slots.Answer{State: slots.Queued, Position: 2, Since: w2.answers["f"].Since}, w2.answers["f"])
		w2.set(slotapi.SetRequest{MaxConcurrent: 4})
	})
	w2.at(4*time.Second, func() {
		require.Equal(t, []string{"ok"}, w2.setErrs)
		require.ElementsMatch(t, []string{"d#1 granted", "e#1 granted", "f#1 granted"}, w2.taken(), "raising max_concurrent grants waiters at once")
		require.Equal(t, []string{"c", "d", "e", "f"}, holderTasks(w2.view()), "in line order")
		w2.acquire(w2.request("a", 1))
	})
	w2.at(5*time.Second, func() {
		require.Equal(t, slots.Released, w2.answers["a"].State, "a key released before the hand-over is still remembered")
		w2.env.CancelWorkflow()
	})
	w2.env.ExecuteWorkflow(slotapi.PoolWorkflowName, in)
	require.True(t, w2.env.IsWorkflowCompleted())
}

// Notices under way when the pool continues-as-new are sent again by the
// next run: a waiter may hear of its grant twice, never not at all.
func TestSlotPoolHandsOverNoticesUnderWay(t *testing.T) {
	w := newPoolWorld(t)
	w.at(time.Second, func() {
		w.acquire(w.request("a", 1))
		w.acquire(w.request("b", 1))
	})
	w.at(2*time.Second, func() {
		w.env.SetContinueAsNewSuggested(true)
		w.release("a", 1)
	})
	w.env.ExecuteWorkflow(slotapi.PoolWorkflowName, slotapi.PoolInput{Pool: "p", Limits: &slots.Limits{MaxConcurrent: 1}})
	in := continued(t, w.env)
	var st poolState
	require.NoError(t, json.Unmarshal(in.Resume, &st))
	require.Equal(t, []string{"b"}, func() []string {
		var out []string
		for _, h := range st.Pool.Holders {
			out = append(out, h.Key.Task)
		}
		return out
	}())
	require.Len(t, st.Outbox, 1, "b's grant was under way at the hand-over")

	w2 := newPoolWorld(t)
	w2.at(time.Second, func() {
		require.Equal(t, []string{"b#1 granted"}, w2.taken())
		w2.env.CancelWorkflow()
	})
	w2.env.ExecuteWorkflow(slotapi.PoolWorkflowName, in)
}

// A holder whose workflow closed without releasing loses its slot at the
// next check; a waiter whose workflow is gone when its turn comes passes
// its grant on; a waiter's timeout refuses it.
func TestSlotPoolFreesTheSlotsOfClosedWorkflows(t *testing.T) {
	w := newPoolWorld(t)
	w.at(time.Second, func() {
		w.acquire(w.request("a", 1))
		w.acquire(w.request("b", 1))
		w.acquire(w.request("c", 1))
		timed := w.request("d", 1)
		timed.Timeout = 10 * time.Minute
		w.acquire(timed)
	})
	w.at(2*time.Second, func() {
		w.mu.Lock()
		w.closed["a"] = true // terminated while holding
		w.closed["b"] = true // terminated while waiting
		w.mu.Unlock()
	})
	w.at(2*time.Minute, func() {
		require.NotZero(t, w.checks)
		require.Equal(t, []string{"c#1 granted"}, w.taken(), "a's slot passed over b, whose workflow is gone, to c")
		v := w.view()
		require.Equal(t, []string{"c"}, holderTasks(v))
		require.Equal(t, []string{"1:d"}, waiterTasks(v))
		require.Equal(t, 2, v.Dropped)
	})
	w.at(12*time.Minute, func() {
		require.Equal(t, []string{"c#1 granted", "d#1 refused timeout"}, w.taken())
		require.Empty(t, w.view().Waiters)
		w.env.CancelWorkflow()
	})
	w.env.ExecuteWorkflow(slotapi.PoolWorkflowName, slotapi.PoolInput{Pool: "p", Limits: &slots.Limits{MaxConcurrent: 1}, CheckEvery: time.Minute})
	require.True(t, w.env.IsWorkflowCompleted())
}

func TestSlotPoolSetRefusesBadLimits(t *testing.T) {
	w := newPoolWorld(t)
	w.at(time.Second, func() {
		w.set(slotapi.SetRequest{MaxConcurrent: 0})
		bad := -2
		w.set(slotapi.SetRequest{MaxConcurrent: 2, MaxTotal: &bad, CheckEvery: time.Millisecond})
		total := 7
		w.set(slotapi.SetRequest{MaxConcurrent: 5, MaxTotal: &total, CheckEvery: 2 * time.Minute})
	})
	w.at(2*time.Second, func() {
		require.Equal(t, []string{
			"max_concurrent 0 must be between 1 and 10000",
			"max_total -2 must be between 0 (no limit) and 1000000\ncheck every 1ms must be between 1s and 1h0m0s",
			"ok",
		}, w.setErrs)
		v := w.view()
		require.Equal(t, slots.Limits{MaxConcurrent: 5, MaxTotal: 7}, v.Limits)
		require.Equal(t, 2*time.Minute, v.CheckEvery)
		require.Equal(t, 20*time.Minute, v.Lease)
		w.set(slotapi.SetRequest{MaxConcurrent: 6})
	})
	w.at(3*time.Second, func() {
		require.Equal(t, slots.Limits{MaxConcurrent: 6, MaxTotal: 7}, w.view().Limits, "max_total kept when not given")
		w.env.CancelWorkflow()
	})
	w.env.ExecuteWorkflow(slotapi.PoolWorkflowName, slotapi.PoolInput{Pool: "p"})
	require.True(t, w.env.IsWorkflowCompleted())
}

// A pool started at a time scale checks its holders, and leases their
// slots, at the scaled default; a check interval given is used as given.
func TestSlotPoolChecksAtItsTimeScale(t *testing.T) {
	for _, tc := range []struct {
		in   slotapi.PoolInput
		want time.Duration
	}{
		{slotapi.PoolInput{Pool: "p"}, slotapi.DefaultCheckEvery},
		{slotapi.PoolInput{Pool: "p", TimeScale: 60}, slotapi.DefaultCheckEvery / 60},
		{slotapi.PoolInput{Pool: "p", TimeScale: 60, CheckEvery: 2 * time.Second}, 2 * time.Second},
	} {
		w := newPoolWorld(t)
		// As soon as the pool runs: counted from the environment's start,
		// the query could come before the workflow function began.
		wfstart.Install(w.env).After(0, func() {
			v := w.view()
			require.Equal(t, tc.want, v.CheckEvery, "%+v", tc.in)
			require.Equal(t, slotapi.LeaseChecks*tc.want, v.Lease, "%+v", tc.in)
			w.env.CancelWorkflow()
		})
		w.env.ExecuteWorkflow(slotapi.PoolWorkflowName, tc.in)
		require.True(t, w.env.IsWorkflowCompleted())
	}
}

// The pool serves its line by turns across runs: a run of one task that
// asks behind a run of five gets the next slot freed, and the pool's view
// numbers the waiters in the order they will be served.
func TestSlotPoolServesRunsInTurn(t *testing.T) {
	w := newPoolWorld(t)
	ask := func(task, run string) {
		r := w.request(task, 1)
		r.Run = run
		w.acquire(r)
	}
	w.at(time.Second, func() {
		for _, task := range []string{"big1", "big2", "big3", "big4", "big5"} {
			ask(task, "big")
		}
	})
	w.at(2*time.Second, func() { ask("small1", "small") })
	w.at(3*time.Second, func() {
		require.Equal(t, 1, w.answers["small1"].Position, "the small run is served next")
		require.Equal(t, []string{"1:small1", "2:big2", "3:big3", "4:big4", "5:big5"}, waiterTasks(w.view()))
		w.release("big1", 1)
	})
	w.at(4*time.Second, func() {
		require.Equal(t, []string{"small1#1 granted"}, w.taken())
		w.env.CancelWorkflow()
	})
	w.env.ExecuteWorkflow(slotapi.PoolWorkflowName, slotapi.PoolInput{Pool: "agents", Limits: &slots.Limits{MaxConcurrent: 1}})
	require.True(t, w.env.IsWorkflowCompleted())
}

// acquireMany sends one acquire-many update; its answers land in
// w.answers by task, and a malformed member's refusal as its Detail.
func (w *poolWorld) acquireMany(rs ...slots.Request) {
	w.env.UpdateWorkflow(slotapi.UpdateAcquireMany, "", &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { w.t.Errorf("acquire-many rejected: %v", err) },
		OnComplete: func(v any, err error) {
			require.NoError(w.t, err)
			res := v.(slotapi.AcquireManyResult)
			require.Len(w.t, res.Answers, len(rs), "one answer per request")
			w.mu.Lock()
			defer w.mu.Unlock()
			for i, r := range rs {
				a := res.Answers[i].Answer
				if e := res.Answers[i].Error; e != "" {
					a = slots.Answer{Detail: "error: " + e}
				}
				w.answers[fmt.Sprintf("%s#%d", r.Key.Task, r.Key.Attempt)] = a
			}
		},
	}, slotapi.AcquireMany{Requests: rs})
}

// One acquire-many answers each of its requests as the acquire update
// would have alone: grants while slots are free, then places in line by
// turns across runs; the same key asked twice gets the same answer; a
// malformed request is refused alone; a key released before is answered
// released. The line it forms is served as any other.
func TestSlotPoolAnswersABatchOfAcquiresEachOnItsOwn(t *testing.T) {
	w := newPoolWorld(t)
	ask := func(task, run string) slots.Request {
		r := w.request(task, 1)
		r.Run = run
		return r
	}
	w.at(time.Second, func() {
		w.acquireMany(ask("a1", "big"), ask("a2", "big"), ask("a3", "big"), ask("a4", "big"),
			ask("s1", "small"), ask("a2", "big"), slots.Request{Key: slots.Key{Task: "bad"}})
	})
	w.at(2*time.Second, func() {
		w.mu.Lock()
		got := map[string]string{}
		for k, a := range w.answers {
			got[k] = fmt.Sprintf("%s %d %s", a.State, a.Position, a.Detail)
		}
		w.mu.Unlock()
		require.Equal(t, map[string]string{
			"a1#1":  "granted 0 ",
			"a2#1":  "queued 2 ", // asked again after s1: its place now
			"a3#1":  "queued 2 ",
			"a4#1":  "queued 3 ",
			"s1#1":  "queued 1 ", // a run not served yet goes first
			"bad#0": " 0 error: key: attempt 0 must be at least 1",
		}, got)
		require.Equal(t, []string{"1:s1", "2:a2", "3:a3", "4:a4"}, waiterTasks(w.view()),
			"the small run, not served yet, ahead of the big one")
		w.release("a1", 1)
	})
	w.at(3*time.Second, func() {
		require.Equal(t, []string{"s1#1 granted"}, w.taken())
		w.release("s1", 1)
		w.acquireMany(ask("a1", "big"), ask("a5", "big"))
	})
	w.at(4*time.Second, func() {
		require.Equal(t, []string{"s1#1 granted", "a2#1 granted"}, w.taken(), "then the big run's turn")
		require.Equal(t, slots.Released, w.answers["a1#1"].State, "a released key is never granted again")
		require.Equal(t, slots.Queued, w.answers["a5#1"].State)
		w.env.CancelWorkflow()
	})
	w.env.ExecuteWorkflow(slotapi.PoolWorkflowName, slotapi.PoolInput{Pool: "agents", Limits: &slots.Limits{MaxConcurrent: 1}})
	require.True(t, w.env.IsWorkflowCompleted())
}

func TestSlotPoolRefusesAnEmptyOrOversizedBatch(t *testing.T) {
	require.ErrorContains(t, slotapi.AcquireMany{}.Validate(), "at least one")
	require.ErrorContains(t, slotapi.AcquireMany{Requests: make([]slots.Request, slotapi.MaxAcquireMany+1)}.Validate(), "at most 500")
	require.NoError(t, slotapi.AcquireMany{Requests: make([]slots.Request, 1)}.Validate())
}
