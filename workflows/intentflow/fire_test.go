package intentflow

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities/intentact"
	"karvi-edda-temporal/api/intent"
	"karvi-edda-temporal/intent"
)

// fireTime is a fire's nominal time in these tests: a multiple of ten
// seconds, one of the test intent's times.
var fireTime = time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)

// testIntent fires task T5 every ten seconds, with a one-second minimum
// interval so backoffs are 1s, 2s, 4s...
func testIntent(t *testing.T, r intent.Request) intent.Spec {
	t.Helper()
	data, err := os.ReadFile("../../testdata/sample/dispatch.json")
	require.NoError(t, err)
	target, err := intent.ParseTarget(data)
	require.NoError(t, err)
	r.Name, r.Target = "t5-every-10s", target
	if r.Cron == "" && r.RunAt == "" {
		r.Cron = "*/10 * * * * * *"
	}
	if r.MinInterval == 0 {
		r.MinInterval = time.Second
	}
	s, err := intent.Build(r, fireTime.Add(-time.Hour))
	require.NoError(t, err)
	return s
}

// fireEnv runs one fire at fireTime (started at `late` after it), with the
// intent activities mocked; calls records the activities in order.
type fireEnv struct {
	*testsuite.TestWorkflowEnvironment
	mu     sync.Mutex
	calls  []string
	pauses []string
	timers []time.Duration
}

func newFireEnv(t *testing.T, late time.Duration, prev *intent.State) *fireEnv {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := &fireEnv{TestWorkflowEnvironment: suite.NewTestWorkflowEnvironment()}
	env.RegisterWorkflow(IntentFireWorkflow)
	env.RegisterActivity(&intentact.Activities{})
	env.SetStartTime(fireTime.Add(late))
	require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(scheduledStartTime.ValueSet(fireTime))))
	if prev != nil {
		env.SetLastCompletionResult(*prev)
	}
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		env.mu.Lock()
		env.timers = append(env.timers, d)
		env.mu.Unlock()
	})
	env.OnActivity(intentActs.PauseIntent, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req intentact.PauseRequest) error {
			env.note("pause")
			env.mu.Lock()
			env.pauses = append(env.pauses, req.Note)
			env.mu.Unlock()
			return nil
		}).Maybe()
	return env
}

func (e *fireEnv) note(call string) {
	e.mu.Lock()
	e.calls = append(e.calls, call)
	e.mu.Unlock()
}

func (e *fireEnv) run(t *testing.T, spec intent.Spec) intent.State {
	t.Helper()
	e.ExecuteWorkflow(IntentFireWorkflow, intentapi.FireInput{Intent: spec})
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
	var st intent.State
	require.NoError(t, e.GetWorkflowResult(&st))
	return st
}

func (e *fireEnv) startsTarget(workflowID string, attempt int) {
	e.OnActivity(intentActs.StartTarget, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req intentact.StartTargetRequest) (intentact.StartTargetResult, error) {
			e.note("start")
			return intentact.StartTargetResult{WorkflowID: workflowID, RunID: "r1", Attempt: max(attempt, req.NextAttempt)}, nil
		})
}

func (e *fireEnv) targetEnds(outcomes ...intent.Outcome) {
	n := 0
	e.OnActivity(intentActs.AwaitTarget, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req intentact.AwaitTargetRequest) (intentact.AwaitTargetResult, error) {
			e.note("await")
			o := outcomes[min(n, len(outcomes)-1)]
			n++
			o.WorkflowID = req.WorkflowID
			return intentact.AwaitTargetResult{Outcome: &o}, nil
		})
}

func (e *fireEnv) schedule(s intentact.IntentSchedule) {
	e.OnActivity(intentActs.InspectIntent, mock.Anything, mock.Anything).Return(
		func(context.Context, string) (intentact.IntentSchedule, error) {
			e.note("inspect")
			return s, nil
		})
}

var (
	completed = intent.Outcome{Target: "task T42", Status: "completed", Completed: true, Attempt: 1}
	blocked   = intent.Outcome{Target: "task T42", Status: "blocked", Detail: "Phase test failed", Attempt: 1}
)

func TestFireRunsItsTargetAndConverges(t *testing.T) {
	env := newFireEnv(t, 200*time.Millisecond, nil)
	env.startsTarget("karvi-task-T42", 1)
	env.targetEnds(completed)
	st := env.run(t, testIntent(t, intent.Request{Until: "task_completed"}))

	require.Equal(t, []string{"start", "await", "pause"}, env.calls)
	require.Equal(t, intent.StatusConverged, st.Status)
	require.Equal(t, []string{"converged: until task_completed holds after run 1 (task T42 completed)"}, env.pauses)
	require.Equal(t, 1, st.Runs)
	require.Equal(t, 1, st.LastAttempt)
	require.Len(t, st.Recent, 1)
	rec := st.Recent[0]
	require.Equal(t, intent.FireScheduled, rec.Kind)
	require.Equal(t, intent.ResultRan, rec.Result)
	require.Equal(t, "task T42 completed", rec.Outcome)
	require.Equal(t, fireTime, rec.Nominal.UTC())
	require.Empty(t, st.Doing)
	require.False(t, st.BusySince.IsZero())
	require.False(t, st.BusyUntil.Before(st.BusySince))
}

func TestFireBlockedOutcomeIsARunNotAnError(t *testing.T) {
	env := newFireEnv(t, 0, &intent.State{Status: intent.StatusActive, Runs: 2, LastAttempt: 2})
	env.OnActivity(intentActs.StartTarget, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req intentact.StartTargetRequest) (intentact.StartTargetResult, error) {
			require.Equal(t, 3, req.NextAttempt, "one past the intent's last attempt")
			env.note("start")
			return intentact.StartTargetResult{WorkflowID: "karvi-task-T42", RunID: "r", Attempt: req.NextAttempt}, nil
		})
	env.targetEnds(blocked)
	st := env.run(t, testIntent(t, intent.Request{Until: "task_completed"}))
	require.Equal(t, intent.StatusActive, st.Status)
	require.Equal(t, 3, st.Runs)
	require.Zero(t, st.ConsecutiveErrors)
	require.Empty(t, env.pauses)
	require.Equal(t, "task T42 blocked: Phase test failed", st.LastOutcome.String())
}

// A target that cannot start backs off from the minimum interval, doubling,
// and the third failure in a row opens the circuit: the schedule is
// paused with a note naming the last problem.
func TestFireBacksOffThenOpensTheCircuit(t *testing.T) {
	env := newFireEnv(t, 0, nil)
	env.OnActivity(intentActs.StartTarget, mock.Anything, mock.Anything).Return(
		func(context.Context, intentact.StartTargetRequest) (intentact.StartTargetResult, error) {
			env.note("start")
			return intentact.StartTargetResult{}, temporal.NewNonRetryableApplicationError(
				"task T42 already has a running workflow karvi-task-T42 (run x) that intent t5-every-10s did not start", intentact.ErrTargetBusy, nil)
		})
	env.schedule(intentact.IntentSchedule{Exists: true})
	st := env.run(t, testIntent(t, intent.Request{}))

	require.Equal(t, []string{"start", "inspect", "start", "inspect", "start", "pause"}, env.calls)
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, env.timers)
	require.Equal(t, intent.StatusError, st.Status)
	require.Equal(t, 3, st.ConsecutiveErrors)
	require.Len(t, env.pauses, 1)
	require.True(t, strings.HasPrefix(env.pauses[0], "error: 3 consecutive failed fires; last: cannot start task T5: task T42 already has a running workflow"), env.pauses[0])
	require.Equal(t, intent.ResultError, st.Recent[0].Result)
	require.Equal(t, 3, st.Recent[0].Tries)
	require.Zero(t, st.Runs)
}

// A target that ends without an outcome (its workflow failed) is a failed
// fire too; a later success resets the count.
func TestFireTargetFailureThenSuccess(t *testing.T) {
	env := newFireEnv(t, 0, nil)
	env.startsTarget("karvi-task-T42", 1)
	n := 0
	env.OnActivity(intentActs.AwaitTarget, mock.Anything, mock.Anything).Return(
		func(context.Context, intentact.AwaitTargetRequest) (intentact.AwaitTargetResult, error) {
			env.note("await")
			if n++; n == 1 {
				return intentact.AwaitTargetResult{Failure: "karvi-task-T42 ended without a result: invalid dispatch plan"}, nil
			}
			o := blocked
			return intentact.AwaitTargetResult{Outcome: &o}, nil
		})
	env.schedule(intentact.IntentSchedule{Exists: true})
	st := env.run(t, testIntent(t, intent.Request{}))
	require.Equal(t, []string{"start", "await", "inspect", "start", "await"}, env.calls)
	require.Equal(t, 1, st.Errors)
	require.Zero(t, st.ConsecutiveErrors)
	require.Equal(t, 1, st.Runs)
	require.Equal(t, intent.ResultRan, st.Recent[0].Result)
}

// A person paused the intent while the fire backed off: it does not try
// again.
func TestFireDoesNotRetryOncePaused(t *testing.T) {
	env := newFireEnv(t, 0, nil)
	env.OnActivity(intentActs.StartTarget, mock.Anything, mock.Anything).Return(
		func(context.Context, intentact.StartTargetRequest) (intentact.StartTargetResult, error) {
			env.note("start")
			return intentact.StartTargetResult{}, temporal.NewNonRetryableApplicationError("busy", intentact.ErrTargetBusy, nil)
		})
	env.schedule(intentact.IntentSchedule{Exists: true, Paused: true, Note: "paused by ana"})
	st := env.run(t, testIntent(t, intent.Request{}))
	require.Equal(t, []string{"start", "inspect"}, env.calls)
	require.Equal(t, intent.ResultHeld, st.Recent[0].Result)
	require.Equal(t, intent.StatusActive, st.Status)
}

// A fire due while the previous fire's target ran is skipped without
// touching anything.
func TestFireDueWhileBusyIsSkipped(t *testing.T) {
	prev := &intent.State{Status: intent.StatusActive, Runs: 1,
		BusySince: fireTime.Add(-15 * time.Second), BusyUntil: fireTime.Add(5 * time.Second)}
	env := newFireEnv(t, 6*time.Second, prev)
	st := env.run(t, testIntent(t, intent.Request{}))
	require.Empty(t, env.calls)
	require.Equal(t, 1, st.Skipped)
	require.Equal(t, intent.ResultOverlap, st.Recent[0].Result)
	require.Equal(t, prev.BusyUntil, st.BusyUntil)
}

// After downtime under defer, the fires the server let pass are folded
// into one more run, a minimum interval after the catch-up.
func TestFireDefersTheOverflow(t *testing.T) {
	env := newFireEnv(t, 4*time.Second, &intent.State{Status: intent.StatusActive, BusyUntil: fireTime.Add(-time.Minute)})
	env.startsTarget("karvi-task-T42", 1)
	env.targetEnds(blocked)
	env.schedule(intentact.IntentSchedule{Exists: true, MissedCatchUpWindow: 2})
	st := env.run(t, testIntent(t, intent.Request{Overflow: "defer", MinInterval: 3 * time.Second}))

	require.Equal(t, []string{"inspect", "start", "await", "start", "await"}, env.calls)
	require.Equal(t, []time.Duration{3 * time.Second}, env.timers)
	require.Equal(t, 2, st.Runs)
	require.Zero(t, st.Deferred)
	require.Equal(t, 2, st.MissedSeen)
	require.Len(t, st.Recent, 2)
	require.Equal(t, intent.FireDeferred, st.Recent[1].Kind)
	require.Equal(t, "for 2 missed fires; task T42 blocked: Phase test failed", st.Recent[1].Outcome)
}

// An update lowered max_runs below the runs made: the next fire converges
// without running.
func TestFireConvergesWithoutRunningWhenDone(t *testing.T) {
	env := newFireEnv(t, 0, &intent.State{Status: intent.StatusActive, Runs: 4})
	st := env.run(t, testIntent(t, intent.Request{MaxRuns: 4}))
	require.Equal(t, []string{"pause"}, env.calls)
	require.Equal(t, []string{"converged: max_runs 4 reached"}, env.pauses)
	require.Equal(t, intent.StatusConverged, st.Status)
	require.Equal(t, intent.ResultHeld, st.Recent[0].Result)
}

// The first fire after a person unpaused an intent in error starts with no
// failure counted.
func TestFireAfterUnpauseClosesTheCircuit(t *testing.T) {
	env := newFireEnv(t, 0, &intent.State{Status: intent.StatusError, Reason: "3 consecutive failed fires", ConsecutiveErrors: 3, Errors: 3})
	env.startsTarget("karvi-task-T42", 1)
	env.targetEnds(blocked)
	st := env.run(t, testIntent(t, intent.Request{}))
	require.Equal(t, intent.StatusActive, st.Status)
	require.Empty(t, st.Reason)
	require.Equal(t, 3, st.Errors)
	require.Zero(t, st.ConsecutiveErrors)
}
