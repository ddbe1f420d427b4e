package taskflow

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/fleet"
	"karvi-edda-temporal/mapping"
)

// queueLog records the task queue of every activity the workflow ran.
type queueLog struct {
	mu     sync.Mutex
	shared string
	calls  []string // "Type@queue"
}

func watchQueues(env *testsuite.TestWorkflowEnvironment) *queueLog {
	q := &queueLog{}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.shared == "" {
			q.shared = info.TaskQueue // StartAttempt, the first
		}
		q.calls = append(q.calls, info.ActivityType.Name+"@"+info.TaskQueue)
	})
	return q
}

// on lists the queues activity typ ran on, in order.
func (q *queueLog) on(typ string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, c := range q.calls {
		if name, queue, _ := strings.Cut(c, "@"); name == typ {
			out = append(out, queue)
		}
	}
	return out
}

// lostHost fails every activity sent to host's queue as one no worker
// took within the grace does.
func lostHost(shared func() string, host string) func(context.Context) error {
	return func(ctx context.Context) error {
		if activity.GetInfo(ctx).TaskQueue == fleet.Queue(shared(), host) {
			return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		}
		return nil
	}
}

// runExampleA runs example A's dispatch on f's conductor to its end.
func runExampleA(t *testing.T, env *testsuite.TestWorkflowEnvironment, f *fakeConductor) taskapi.Result {
	t.Helper()
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// An attempt claims a host on the shared queue; its start and its
// conductor activities go to that host's queue, which the status query,
// the attempt's summary and the Web UI's details name; status writes stay
// on the shared queue.
func TestConductorActivitiesFollowTheirHost(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1,
		hostOf: func(int) string { return "h2" }}
	f.register(env)
	q := watchQueues(env)
	var mid taskapi.Status
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(taskapi.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&mid))
	}, 3*time.Second)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)

	host := fleet.Queue(q.shared, "h2")
	require.Equal(t, []string{q.shared}, q.on("ClaimHost"))
	require.Equal(t, []string{host}, q.on("StartAttempt"))
	deliveries := q.on("DeliverEvents")
	require.NotEmpty(t, deliveries)
	require.Equal(t, repeat(host, len(deliveries)), deliveries)
	require.Equal(t, []string{q.shared}, q.on("SetTaskStatus"))

	require.Equal(t, "h2", mid.Host)
	require.Equal(t, taskapi.StageRunning, mid.Stage)
	require.Equal(t, "h2", res.Attempts[0].Host)
}

// A start whose first try timed out after it ran (a loaded host whose
// heartbeats came late) is retried on the same host, where the conductor
// the first try started runs: never on a second host beside it.
func TestRetriedStartStaysOnItsHost(t *testing.T) {
	env := newEnv(t)
	q := watchQueues(env)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 2,
		claimOf: func(n int) string { return []string{"h2", "h3", "h1"}[(n-1)%3] }, startFails: 1}
	res := runExampleA(t, env, f)

	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 1, res.Attempt)
	require.Equal(t, []string{q.shared}, q.on("ClaimHost"), "one claim")
	h2 := fleet.Queue(q.shared, "h2")
	require.Equal(t, []string{h2, h2}, q.on("StartAttempt"), "the retry stays on the claimed host")
	require.Equal(t, "h2", res.Attempts[0].Host)
}

// A claimed host that does not take the start within the grace is given up
// before anything ran there, and the same attempt claims another host.
func TestStartNotTakenByItsHostClaimsAnother(t *testing.T) {
	env := newEnv(t)
	q := watchQueues(env)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 2,
		claimOf: func(n int) string { return map[int]string{1: "h2", 2: "h1"}[n] }}
	f.startGone = lostHost(func() string { return q.shared }, "h2")
	res := runExampleA(t, env, f)

	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 1, res.Attempt, "no attempt was lost: none ran")
	require.Len(t, res.Attempts, 1)
	require.Equal(t, "h1", res.Attempts[0].Host)
	require.Equal(t, []string{q.shared, q.shared}, q.on("ClaimHost"))
	require.Equal(t, []string{fleet.Queue(q.shared, "h2"), fleet.Queue(q.shared, "h1")}, q.on("StartAttempt"))
}

// A host that takes none of its attempt's activities within the grace is
// lost: the brief is settled saying so, the attempt ends host-lost, and a
// new attempt starts on the shared queue, where another host takes it.
func TestLostHostStartsTheTaskAnewElsewhere(t *testing.T) {
	env := newEnv(t)
	q := watchQueues(env)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 2,
		hostOf: func(n int) string { return map[int]string{1: "h2", 2: "h1"}[n] }}
	f.gone = lostHost(func() string { return q.shared }, "h2")
	res := runExampleA(t, env, f)

	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 2, res.Attempt)
	require.Len(t, res.Attempts, 2)
	lost := res.Attempts[0]
	require.Equal(t, taskapi.EndedHostLost, lost.Ended)
	require.Equal(t, "host h2 lost during phase implement", lost.LastError)
	require.Equal(t, "h2", lost.Host)
	require.Equal(t, "h1", res.Attempts[1].Host)
	require.Equal(t, mapping.PlanName("T5", 2), res.PlanName)
	require.Equal(t, "redispatch", f.prepared[1].Dispatch.Mode)

	require.Equal(t, []string{q.shared, q.shared}, q.on("ClaimHost"), "the new attempt claims a host on the shared queue")
	require.Equal(t, []string{fleet.Queue(q.shared, "h2"), fleet.Queue(q.shared, "h1")}, q.on("StartAttempt"))
	deliveries := q.on("DeliverEvents")
	require.Equal(t, fleet.Queue(q.shared, "h2"), deliveries[0])
	require.Equal(t, repeat(fleet.Queue(q.shared, "h1"), len(deliveries)-1), deliveries[1:])

	// Before the new attempt's skeleton, one patch settled the old brief:
	// the phase under way failed, with why.
	var settled map[string]any
	n := 0
	for i, entry := range f.timeline {
		if !strings.HasPrefix(entry, "patch ") {
			continue
		}
		if entry == "patch settle" {
			require.Equal(t, "patch init", f.timeline[i+1], "the new attempt's skeleton: %v", f.timeline)
			require.NoError(t, json.Unmarshal(f.patches[n], &settled))
		}
		n++
	}
	require.NotNil(t, settled, "a settling patch: %v", f.timeline)
	impl := settled["phases"].(map[string]any)["implement"].(map[string]any)
	require.Equal(t, "failed", impl["status"])
	require.Equal(t, "host h2 lost during phase implement", impl["error"])
}

// An abort whose conductor's host is gone ends the task aborted: when only
// the stop finds it gone, the attempt ends aborted and its conductor is
// left to the fence; when its delivery finds it gone too, the attempt is
// lost first, and the abort ends the task before a new conductor starts.
func TestAbortWithTheHostGoneEndsAborted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fails    func(typ string) bool
		attempts []string
		// left: which attempts say their conductor was left running,
		// out of reach, so that what they delivered may fall short of
		// what their conductor went on to do.
		left []bool
	}{
		{"the stop finds it gone", func(typ string) bool { return typ == "AbortConductor" }, []string{taskapi.EndedAborted}, []bool{true}},
		{"everything finds it gone", func(string) bool { return true }, []string{taskapi.EndedHostLost, taskapi.EndedAborted}, []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			q := watchQueues(env)
			var mu sync.Mutex
			lost := false
			f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")[:2], perBatch: 2,
				hang: true, hostOf: func(int) string { return "h2" }}
			f.gone = func(ctx context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				if lost && tc.fails(activity.GetInfo(ctx).ActivityType.Name) {
					return lostHost(func() string { return q.shared }, "h2")(ctx)
				}
				return nil
			}
			f.register(env)
			env.RegisterDelayedCallback(func() {
				mu.Lock()
				lost = true
				mu.Unlock()
				env.SignalWorkflow(taskapi.SignalAbort, taskapi.AbortSignal{Reason: "user"})
			}, 5500*time.Millisecond)
			env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
			require.NoError(t, env.GetWorkflowError())
			var res taskapi.Result
			require.NoError(t, env.GetWorkflowResult(&res))
			require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
			var ended []string
			var left []bool
			for _, a := range res.Attempts {
				ended = append(ended, a.Ended)
				left = append(left, a.ConductorLeft)
			}
			require.Equal(t, tc.attempts, ended)
			require.Equal(t, tc.left, left)
			require.Equal(t, 1, f.starts, "no second conductor")
			require.Zero(t, f.aborts, "no stop reached the lost host")
			require.Equal(t, mapping.TaskBlocked, f.statuses[len(f.statuses)-1].Status)
		})
	}
}

// A redispatch that comes while the host is being lost is what the new
// attempt does already: it costs no attempt of its own.
func TestRedispatchWhileTheHostIsLostStartsOneAttempt(t *testing.T) {
	env := newEnv(t)
	q := watchQueues(env)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 2,
		hostOf: func(n int) string { return map[int]string{1: "h2", 2: "h1"}[n] }}
	f.gone = lostHost(func() string { return q.shared }, "h2")
	f.register(env)
	// The failing delivery takes a second of workflow time (the fake's);
	// the signal comes in the middle of it.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: "again"})
	}, 500*time.Millisecond)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 2, res.Attempt)
	require.Equal(t, taskapi.EndedHostLost, res.Attempts[0].Ended)
}

// The host is part of the state continue-as-new carries: the continued
// run goes on delivering on the same host's queue, without starting anew.
func TestTheHostCrossesContinueAsNew(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1,
		hostOf: func(int) string { return "h2" }}
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Tuning: &taskapi.Tuning{ContinueAsNewAfterPolls: 3}})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next taskapi.TaskInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	var resumed State
	require.NoError(t, json.Unmarshal(next.Resume, &resumed))
	require.Equal(t, "h2", resumed.Current.Host)

	resumed.Tuning = nil
	var err error
	next.Resume, err = json.Marshal(resumed)
	require.NoError(t, err)
	env = newEnv(t)
	f.register(env)
	q := watchQueues(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, next)
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 1, f.starts, "no new attempt")
	deliveries := q.on("DeliverEvents")
	require.NotEmpty(t, deliveries)
	for _, queue := range deliveries {
		require.True(t, strings.HasSuffix(queue, "@h2"), queue)
	}
	require.Empty(t, q.on("StartAttempt"))
}

func TestRenderDetailsNamesTheHost(t *testing.T) {
	plan := taskact.PlanInfo{Summary: mapping.PlanSummary{Name: mapping.PlanName("T5", 2), PhaseIDs: []string{"implement"}}}
	st := State{Dispatch: mapping.DispatchPlan{TaskID: "T5"},
		Current: Attempt{N: 2, Stage: taskapi.StageRunning, Host: "h2", Plan: &plan, Brief: mapping.NewBriefState("T5", plan.Summary)}}
	require.Contains(t, renderDetails(&st), "\nplan `karvi-t5-020d01-r2` on host h2 · 0 of 1 phases done\n")
}
