package intakeflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/intake"
)

// board is a karvi board with the given tasks at _version v.
func board(v int, tasks ...string) json.RawMessage {
	out := fmt.Sprintf(`{"_version":%d,"taskPlan":{"tasks":[`, v)
	for i, t := range tasks {
		if i > 0 {
			out += ","
		}
		out += t
	}
	return json.RawMessage(out + `]}}`)
}

func task(id, status string, history ...string) string {
	h := `[{"status":"dispatched","reason":"project_created"}`
	for _, s := range history {
		h += `,` + s
	}
	return fmt.Sprintf(`{"id":%q,"title":"Task %s","status":%q,"runtimeHint":"edda","skill":"sequential","history":%s]}`, id, id, status, h)
}

// script plays the follow activity's results in order and records the
// actions applied.
type script struct {
	mu      sync.Mutex
	follows []intakeapi.FollowResult
	seen    []intakeapi.FollowInput
	applied []intake.Action
	owners  []string
	// refuse answers the start of these tasks refused, with the reason.
	refuse map[string]string
	// scales are the time scales the applies were given; appliedAt when
	// they came, by now (when set).
	scales    []float64
	now       func() time.Time
	appliedAt []time.Time
}

func (s *script) follow(_ context.Context, in intakeapi.FollowInput) (intakeapi.FollowResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, in)
	if len(s.follows) == 0 {
		return intakeapi.FollowResult{}, nil
	}
	r := s.follows[0]
	s.follows = s.follows[1:]
	return r, nil
}

func (s *script) apply(_ context.Context, in intakeapi.ApplyInput) (intakeapi.ApplyResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = append(s.applied, in.Action)
	s.owners = append(s.owners, in.Owner)
	s.scales = append(s.scales, in.TimeScale)
	if s.now != nil {
		s.appliedAt = append(s.appliedAt, s.now())
	}
	if why, ok := s.refuse[in.Action.TaskID]; ok {
		return intakeapi.ApplyResult{Result: "not run: " + why, Refused: why}, nil
	}
	return intakeapi.ApplyResult{Result: "done " + string(in.Action.Kind)}, nil
}

func (s *script) kinds() []string {
	var out []string
	for _, a := range s.applied {
		out = append(out, string(a.Kind)+" "+a.TaskID)
	}
	return out
}

// run runs the workflow until it continues-as-new after ticks ticks and
// returns the input it hands over.
func run(t *testing.T, s *script, in intakeapi.Input, ticks int) (intakeapi.Input, intakeapi.Status) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(IntakeWorkflow, workflow.RegisterOptions{Name: intakeapi.WorkflowName})
	env.RegisterActivityWithOptions(s.follow, activity.RegisterOptions{Name: intakeapi.FollowActivity})
	env.RegisterActivityWithOptions(s.apply, activity.RegisterOptions{Name: intakeapi.ApplyActivity})
	in.BoardURL = "http://127.0.0.1:3461"
	in.TicksBeforeContinue = ticks
	env.ExecuteWorkflow(intakeapi.WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "continues as new, got %v", env.GetWorkflowError())
	var next intakeapi.Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	v, err := env.QueryWorkflow(intakeapi.QueryStatus)
	require.NoError(t, err)
	var st intakeapi.Status
	require.NoError(t, v.Get(&st))
	return next, st
}

// A task seen on every board read is started once.
func TestIntakeClaimsOnce(t *testing.T) {
	b := board(3, task("T1", "dispatched"), `{"id":"T2","title":"other","status":"dispatched","runtimeHint":"openclaw"}`)
	s := &script{follows: []intakeapi.FollowResult{{Board: b}, {Board: b}, {Board: board(4, task("T1", "dispatched"))}}}
	next, st := run(t, s, intakeapi.Input{}, 4)
	require.Equal(t, []string{"start T1"}, s.kinds())
	require.Equal(t, "karvi-task-T1", s.applied[0].WorkflowID)
	require.Equal(t, "T1", s.applied[0].Dispatch.TaskID)
	require.Len(t, next.State.Claims, 1)
	require.Equal(t, intake.PhaseRunning, next.State.Claims[0].Phase)
	require.Equal(t, 1, st.Counts.Started)
	require.Equal(t, "edda", st.RuntimeHint)
	// The follower is always handed the state as it is now.
	require.Empty(t, s.seen[0].State.Claims)
	require.Len(t, s.seen[1].State.Claims, 1)
}

// karvi unreachable for a while, then the board with what was dispatched
// meanwhile: everything on it is claimed, and the problem shows until then.
func TestIntakeReconcilesAfterDowntime(t *testing.T) {
	s := &script{follows: []intakeapi.FollowResult{
		{Problem: "karvi http://127.0.0.1:3461: connection refused"},
		{Board: board(9, task("T1", "dispatched"), task("T2", "dispatched"))},
	}}
	next, st := run(t, s, intakeapi.Input{}, 3)
	require.Equal(t, []string{"start T1", "start T2"}, s.kinds())
	require.Equal(t, "connection refused", s.seen[1].Problem[len(s.seen[1].Problem)-len("connection refused"):], "the follower knows the problem shown")
	require.Empty(t, st.Problem, "cleared by the board read")
	require.Equal(t, 1, st.Counts.Unreachable)
	require.EqualValues(t, 9, next.State.Version)
}

// The state crosses continue-as-new: the next run does not claim again
// what the first claimed, and a task it ran to an end is run again only
// when the board sends it back.
func TestIntakeContinueAsNewCarriesState(t *testing.T) {
	s := &script{follows: []intakeapi.FollowResult{{Board: board(2, task("T1", "dispatched"))}}}
	next, _ := run(t, s, intakeapi.Input{RuntimeHint: "edda"}, 1)
	require.Equal(t, []string{"start T1"}, s.kinds())
	require.Equal(t, 1, next.Counts.Continued)

	inProgress := `{"status":"in_progress","from":"dispatched","by":"human"}`
	completed := `{"status":"completed","from":"in_progress","by":"human"}`
	s2 := &script{follows: []intakeapi.FollowResult{
		{Board: board(3, task("T1", "in_progress", inProgress))},
		{Ended: []intakeapi.Ended{{TaskID: "T1", Final: "completed", How: "completed"}}, Board: board(5, task("T1", "completed", inProgress, completed))},
		{Board: board(6, task("T1", "completed", inProgress, completed))},
		{Board: board(8, task("T1", "in_progress", inProgress, completed,
			`{"status":"needs_revision","from":"completed","by":"human"}`, `{"status":"in_progress","from":"needs_revision","by":"human"}`))},
	}}
	last, st := run(t, s2, next, 5)
	require.Equal(t, []string{"redispatch T1"}, s2.kinds(), "not started again; redispatched when sent back")
	require.Equal(t, 2, s2.applied[0].Attempt)
	require.Equal(t, 2, last.State.Claims[0].Attempt)
	require.Equal(t, 2, last.Counts.Continued)
	require.Equal(t, 1, st.Counts.EndsSeen)
}

// A task whose fields make no plan is blocked once with the field named,
// and tasks skipped are shown with why.
func TestIntakeBlocksBadTaskOnceAndShowsSkips(t *testing.T) {
	bad := `{"id":"T3","title":"","status":"dispatched","runtimeHint":"edda"}`
	cancelled := `{"id":"T4","title":"x","status":"cancelled","runtimeHint":"openclaw"}`
	b := board(4, bad, cancelled)
	s := &script{follows: []intakeapi.FollowResult{{Board: b}, {Board: b}}}
	_, st := run(t, s, intakeapi.Input{}, 3)
	require.Equal(t, []string{"block T3"}, s.kinds())
	require.Contains(t, s.applied[0].Reason, "title")
	require.Len(t, st.Skipped, 1)
	require.Equal(t, "T4", st.Skipped[0].TaskID)
	require.Contains(t, st.Skipped[0].Reason, "openclaw")
}

// karvi refusing the token: the intake says so, claims nothing, asks
// again after a wait, and takes the board once karvi answers.
func TestIntakeUnauthorizedWaitsAndSaysSo(t *testing.T) {
	s := &script{follows: []intakeapi.FollowResult{
		{Problem: "karvi http://127.0.0.1:3461: GET /api/board: HTTP 401 (unauthorized): unauthorized", Unauthorized: true},
		{Board: board(5, task("T1", "dispatched"))},
	}}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(IntakeWorkflow, workflow.RegisterOptions{Name: intakeapi.WorkflowName})
	env.RegisterActivityWithOptions(s.follow, activity.RegisterOptions{Name: intakeapi.FollowActivity})
	env.RegisterActivityWithOptions(s.apply, activity.RegisterOptions{Name: intakeapi.ApplyActivity})
	var during intakeapi.Status
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(intakeapi.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, time.Minute)
	env.ExecuteWorkflow(intakeapi.WorkflowName, intakeapi.Input{BoardURL: "http://127.0.0.1:3461", TicksBeforeContinue: 2})
	require.Contains(t, during.Problem, "401")
	require.Empty(t, during.Claims, "nothing claimed while karvi refuses")
	require.Equal(t, []string{"start T1"}, s.kinds())
}

// A start refused because the task's workflow id is someone else's (the
// task blocked on karvi with the reason): the intake holds no claim on
// it, counts it blocked, and does not start it again on later reads. The
// apply and the follower are told who the intake is, and the start
// carries the claim's key.
func TestIntakeRefusedStartHoldsNoClaim(t *testing.T) {
	b := board(3, task("T1", "dispatched"))
	const why = "workflow karvi-task-T1 is already running (run r1) and was not started by this intake for this board task"
	s := &script{follows: []intakeapi.FollowResult{{Board: b}, {Board: b}}, refuse: map[string]string{"T1": why}}
	next, st := run(t, s, intakeapi.Input{}, 3)
	require.Equal(t, []string{"start T1"}, s.kinds())
	require.Len(t, next.State.Claims, 1)
	require.Equal(t, intake.PhaseRefused, next.State.Claims[0].Phase)
	require.Equal(t, why, next.State.Claims[0].Reason)
	require.Equal(t, 1, st.Counts.Blocked)
	require.Zero(t, st.Counts.Started)
	require.EqualValues(t, 1, s.applied[0].Key)
	require.NotEmpty(t, s.owners[0])
	require.Equal(t, s.owners[0], s.seen[0].Owner)
	require.Equal(t, intake.PhaseRefused, s.seen[1].State.Claims[0].Phase, "the follower no longer follows it")
}

// An intake at time scale 60 follows with scaled waits, waits out a
// refused token for 2 s instead of 2 minutes, and hands its scale to what
// it starts; at real time nothing of it shows.
func TestIntakeRunsAtItsTimeScale(t *testing.T) {
	for _, tc := range []struct {
		scale         float64
		poll, maxWait time.Duration
		startedAfter  time.Duration
	}{
		{0, intakeapi.DefaultPoll, 5 * time.Minute, 2 * time.Minute},
		{60, intakeapi.DefaultPoll / 60, 5 * time.Second, 2 * time.Second},
	} {
		s := &script{follows: []intakeapi.FollowResult{
			{Problem: "karvi: HTTP 401 (unauthorized)", Unauthorized: true},
			{Board: board(5, task("T1", "dispatched"))},
		}}
		var ts testsuite.WorkflowTestSuite
		env := ts.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(IntakeWorkflow, workflow.RegisterOptions{Name: intakeapi.WorkflowName})
		env.RegisterActivityWithOptions(s.follow, activity.RegisterOptions{Name: intakeapi.FollowActivity})
		env.RegisterActivityWithOptions(s.apply, activity.RegisterOptions{Name: intakeapi.ApplyActivity})
		start := env.Now()
		s.now = env.Now
		env.ExecuteWorkflow(intakeapi.WorkflowName, intakeapi.Input{BoardURL: "http://127.0.0.1:3461", TicksBeforeContinue: 3, TimeScale: tc.scale})
		require.True(t, env.IsWorkflowCompleted())
		require.Equal(t, tc.poll, s.seen[0].Poll, "scale %v", tc.scale)
		require.Equal(t, tc.maxWait, s.seen[0].MaxWait, "scale %v", tc.scale)
		require.Equal(t, []string{"start T1"}, s.kinds())
		require.Equal(t, tc.startedAfter, s.appliedAt[0].Sub(start).Round(time.Millisecond),
			"scale %v: the start waited out the refused token's wait", tc.scale)
		require.Equal(t, []float64{tc.scale}, s.scales)
	}
}
