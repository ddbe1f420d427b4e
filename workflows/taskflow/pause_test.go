package taskflow

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// limitedConductor is a conductor whose first run meets a usage limit in
// phase test (the tail reports it, the conductor gone), and whose resumed
// run completes the plan.
type limitedConductor struct {
	mu       sync.Mutex
	env      *testsuite.TestWorkflowEnvironment
	f        *fakeConductor
	resetAt  time.Time
	resumes  []taskact.ResumeRequest
	resumeAt []time.Time
	statuses []mapping.TaskStatus
	notes    []taskact.NotifyRequest
	// limitAgain: the resumed runs meet the limit again.
	limitAgain bool
}

func (c *limitedConductor) register(t *testing.T) {
	env := c.env
	c.f = &fakeConductor{t: t}
	env.RegisterActivity(acts)
	env.OnActivity(acts.ClaimHost, mock.Anything, mock.Anything).Return(taskact.ClaimHostResult{}, nil)
	env.OnActivity(acts.StartAttempt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.StartAttemptRequest) (taskact.StartAttemptResult, error) {
			require.True(t, req.WatchLimits, "a new task follows the transcripts")
			info, err := c.f.prepare(taskact.PrepareRequest{Dispatch: req.Dispatch, Attempt: req.Attempt})
			if err != nil {
				return taskact.StartAttemptResult{}, err
			}
			h := taskact.ConductorHandle{PID: 100, PGID: 100}
			d := taskact.DeliverResult{Brief: mapping.NewBriefState(req.Dispatch.TaskID, info.Summary),
				ConductorEnd: taskact.ConductorEnd{Exited: true},
				LimitWatch: taskact.LimitWatch{WatchLimits: true,
					Transcripts: taskact.TranscriptCursor{"test-aaaaaaaa.jsonl": {Offset: 300}},
					Limit: &taskact.UsageLimit{Phase: "test", Transcript: "test-aaaaaaaa.jsonl",
						ResetAt: c.resetAt, Source: "sign:rate_limit_event", Text: "You've hit your limit"}}}
			// What the conductor made of it: blocked, attempts spent.
			o := mapping.PhaseFailedOutcome(mapping.PlanBlocked, "test", 3, mapping.ErrCheckFailed, "check failed")
			d.Outcome = &o
			return taskact.StartAttemptResult{Plan: info, Conductor: &h, Delivery: &d}, nil
		})
	env.OnActivity(acts.ResumeConductor, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.ResumeRequest) (taskact.ResumeResult, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.resumes = append(c.resumes, req)
			c.resumeAt = append(c.resumeAt, env.Now())
			return taskact.ResumeResult{Conductor: &taskact.ConductorHandle{PID: 200, PGID: 200}, Retried: []string{"test"}}, nil
		})
	env.OnActivity(acts.DeliverEvents, mock.Anything, mock.Anything).After(time.Second).Return(
		func(_ context.Context, req taskact.DeliverRequest) (taskact.DeliverResult, error) {
			require.Equal(t, 300, int(req.Transcripts["test-aaaaaaaa.jsonl"].Offset), "the resumed watch starts after what was read")
			if c.limitAgain {
				return taskact.DeliverResult{Brief: req.Brief, ConductorEnd: taskact.ConductorEnd{Exited: true},
					LimitWatch: taskact.LimitWatch{WatchLimits: true, Transcripts: req.Transcripts,
						Limit: &taskact.UsageLimit{Phase: "test", Source: "sign:api_error_status"}}}, nil
			}
			o := mapping.CompletedOutcome()
			return taskact.DeliverResult{Brief: req.Brief, Outcome: &o,
				ConductorEnd: taskact.ConductorEnd{Exited: true}}, nil
		})
	env.OnActivity(acts.PatchBrief, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(acts.Notify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.NotifyRequest) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.notes = append(c.notes, req)
			return nil
		})
	env.OnActivity(acts.SetTaskStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.StatusRequest) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.statuses = append(c.statuses, req.Update.Status)
			return nil
		})
}

func newLimited(t *testing.T) (*testsuite.TestWorkflowEnvironment, *limitedConductor) {
	env := newEnv(t)
	c := &limitedConductor{env: env, resetAt: env.Now().Add(time.Hour).UTC()}
	c.register(t)
	return env, c
}

// pausedStatus queries the status a minute into the pause.
func pausedStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment, got *taskapi.Status) {
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(taskapi.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(got))
	}, time.Minute)
}

// The limit's reset passes: the same plan resumes once, after the reset
// plus the margin, and completes as attempt 1.
func TestUsageLimitPausesUntilTheReset(t *testing.T) {
	env, c := newLimited(t)
	var st taskapi.Status
	pausedStatus(t, env, &st)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t),
		Tuning: &taskapi.Tuning{PauseMargin: 30 * time.Second}})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))

	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, 1, res.Attempt, "a pause counts no attempt")
	require.Empty(t, res.Attempts[:len(res.Attempts)-1], "no attempt ended before the last")
	require.Len(t, c.resumes, 1)
	require.Equal(t, 1, c.resumes[0].Resume)
	require.Equal(t, res.PlanName, c.resumes[0].Plan.Summary.Name, "the same plan")
	require.False(t, c.resumeAt[0].Before(c.resetAt.Add(30*time.Second)), "resumed at %v, reset %v", c.resumeAt[0], c.resetAt)
	require.NotContains(t, c.statuses, mapping.TaskBlocked)
	require.Len(t, c.notes, 2, "a person is told of the pause and the resume")
	require.Equal(t, "paused", c.notes[0].Kind)
	require.Equal(t, c.resetAt, c.notes[0].ResetAt.UTC())
	require.Equal(t, "resumed", c.notes[1].Kind)
	require.NotEqual(t, c.notes[0].ID, c.notes[1].ID)

	require.Equal(t, taskapi.StagePaused, st.Stage)
	require.NotNil(t, st.Pause)
	require.Equal(t, "usage_limit", st.Pause.Reason)
	require.Equal(t, "test", st.Pause.Phase)
	require.Equal(t, c.resetAt, st.Pause.ResetAt.UTC())
	require.Equal(t, c.resetAt.Add(30*time.Second), st.Pause.Until.UTC())
	require.Equal(t, 1, st.Pauses)
}

// A task at time scale 60 whose limit gives no reset pauses for the
// default wait scaled, 30 s for 30 minutes, and then resumes.
func TestScaledTaskPausesForTheScaledWaitWhenNoReset(t *testing.T) {
	env := newEnv(t)
	c := &limitedConductor{env: env} // no reset read
	c.register(t)
	start := env.Now()
	var st taskapi.Status
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(taskapi.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&st))
	}, 10*time.Second)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t),
		Tuning: &taskapi.Tuning{TimeScale: 60}})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)

	require.Equal(t, taskapi.StagePaused, st.Stage, "paused 10 s in")
	require.NotNil(t, st.Pause)
	require.True(t, st.Pause.ResetAt.IsZero())
	require.Equal(t, 30*time.Second, st.Pause.Until.Sub(st.Pause.Since), "PauseWait/60")
	require.Len(t, c.resumes, 1)
	require.True(t, st.Pause.Until.Equal(c.resumeAt[0]), "resumed at %v, when the scaled wait ended at %v", c.resumeAt[0], st.Pause.Until)
	require.Less(t, c.resumeAt[0].Sub(start), time.Minute)
}

// A resume signal ends the pause early.
func TestResumeSignalEndsThePauseEarly(t *testing.T) {
	env, c := newLimited(t)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalResume, taskapi.ResumeSignal{Reason: "limit raised"})
	}, 2*time.Minute)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Len(t, c.resumes, 1)
	require.True(t, c.resumeAt[0].Before(c.resetAt), "resumed at %v, before the reset %v", c.resumeAt[0], c.resetAt)
}

// An abort while paused ends the task aborted: nothing is resumed.
func TestAbortWhilePaused(t *testing.T) {
	env, c := newLimited(t)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalAbort, taskapi.AbortSignal{Reason: "not today"})
	}, 2*time.Minute)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, mapping.MsgUserAbort, res.Outcome.LastError)
	require.Empty(t, c.resumes)
	require.Equal(t, mapping.TaskBlocked, c.statuses[len(c.statuses)-1])
}

// A task that meets the limit again and again ends blocked at the cap.
func TestPauseCapBlocksTheTask(t *testing.T) {
	env, c := newLimited(t)
	c.limitAgain = true
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Tuning: &taskapi.Tuning{MaxPauses: 2, PauseWait: time.Minute}})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
	require.Contains(t, res.Outcome.LastError, "Phase test stopped on its own usage limit 3 times; giving up")
	require.Equal(t, res.Outcome.LastError, res.Outcome.BlockerReason)
	require.Len(t, c.resumes, 2)
}

// The Web UI's details say the task is paused, why, until when, and how
// to end it.
func TestDetailsShowThePause(t *testing.T) {
	until := time.Date(2026, 3, 10, 15, 2, 0, 0, time.UTC)
	st := State{Dispatch: mapping.DispatchPlan{TaskID: "T5"}, Current: Attempt{N: 1, Stage: taskapi.StagePaused},
		Pause: &taskapi.Pause{Reason: taskapi.PausedUsageLimit, Phase: "test", Until: until, Text: "You've hit your limit · resets 3pm"}}
	got := renderDetails(&st)
	require.Contains(t, got, "attempt 1 · paused")
	require.Contains(t, got, "**paused** (usage_limit) in phase test until 2026-03-10 15:02:00 UTC: You've hit your limit · resets 3pm · `starter resume` ends it now")
}
