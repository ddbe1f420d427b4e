package taskflow

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/stalls"
)

// stallingConductor is a conductor whose first attempt stalls in phase
// implement: its first delivery reports the stall, what follows depends on
// the test (progress again, then the plan completes). Later attempts
// complete at once.
type stallingConductor struct {
	mu       sync.Mutex
	f        *fakeConductor
	t0       time.Time
	action   stalls.Action
	starts   []int
	aborts   int
	delivers []taskact.DeliverRequest
	notes    []taskact.NotifyRequest
	patches  []string
	statuses []mapping.TaskStatus
}

func (c *stallingConductor) register(t *testing.T, env *testsuite.TestWorkflowEnvironment) {
	c.f = &fakeConductor{t: t}
	env.RegisterActivity(acts)
	env.OnActivity(acts.ClaimHost, mock.Anything, mock.Anything).Return(taskact.ClaimHostResult{}, nil)
	env.OnActivity(acts.StartAttempt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.StartAttemptRequest) (taskact.StartAttemptResult, error) {
			info, err := c.f.prepare(taskact.PrepareRequest{Dispatch: req.Dispatch, Attempt: req.Attempt})
			if err != nil {
				return taskact.StartAttemptResult{}, err
			}
			c.mu.Lock()
			c.starts = append(c.starts, req.Attempt)
			c.mu.Unlock()
			h := taskact.ConductorHandle{PID: 100 * req.Attempt, PGID: 100 * req.Attempt}
			b := mapping.NewBriefState(req.Dispatch.TaskID, info.Summary)
			d := taskact.DeliverResult{Brief: b, LimitWatch: taskact.LimitWatch{WatchLimits: true}}
			if req.Attempt > 1 {
				o := mapping.CompletedOutcome()
				d.Outcome, d.ConductorEnd = &o, taskact.ConductorEnd{Exited: true}
			}
			return taskact.StartAttemptResult{Plan: info, Conductor: &h, Delivery: &d}, nil
		})
	env.OnActivity(acts.DeliverEvents, mock.Anything, mock.Anything).After(time.Second).Return(
		func(_ context.Context, req taskact.DeliverRequest) (taskact.DeliverResult, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.delivers = append(c.delivers, req)
			n := len(c.delivers)
			res := taskact.DeliverResult{Brief: req.Brief, Next: req.Cursor,
				LimitWatch: taskact.LimitWatch{WatchLimits: true, Transcripts: req.Transcripts},
				StallWatch: taskact.StallWatch{WatchStalls: req.WatchStalls, ProgressAt: req.ProgressAt}}
			switch {
			case req.MaxWait == 0 || c.aborts > 0: // a drain of the stopped conductor
				res.ConductorEnd = taskact.ConductorEnd{Exited: true}
			case n == 1:
				res.Stall = &taskact.Stall{Phase: "implement", Since: c.t0, SeenAt: c.t0.Add(5 * time.Second),
					After: 5 * time.Second, Action: c.action}
				res.ProgressAt = c.t0
			case n == 2:
				res.ProgressAt = c.t0.Add(9 * time.Second) // the agent writes again
			default:
				o := mapping.CompletedOutcome()
				res.Outcome, res.ConductorEnd = &o, taskact.ConductorEnd{Exited: true}
			}
			return res, nil
		})
	env.OnActivity(acts.AbortConductor, mock.Anything, mock.Anything).Return(
		func(context.Context, taskact.AbortRequest) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.aborts++
			return nil
		})
	env.OnActivity(acts.PatchBrief, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.PatchRequest) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, p := range req.Patches {
				c.patches = append(c.patches, string(p.Body))
			}
			return nil
		})
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

func runStalling(t *testing.T, action stalls.Action, edit func(*mapping.DispatchPlan)) (*stallingConductor, taskapi.Result, *testsuite.TestWorkflowEnvironment) {
	env := newEnv(t)
	c := &stallingConductor{t0: env.Now().UTC(), action: action}
	c.register(t, env)
	d := exampleDispatch(t)
	five := 5
	d.StallAfterSec, d.OnStall = &five, string(action)
	if edit != nil {
		edit(&d)
	}
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: d})
	require.NoError(t, env.GetWorkflowError())
	var res taskapi.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	return c, res, env
}

func (c *stallingConductor) notesOf(kind string) []taskact.NotifyRequest {
	var out []taskact.NotifyRequest
	for _, n := range c.notes {
		if n.Kind == kind {
			out = append(out, n)
		}
	}
	return out
}

// warn: the stall is noted on the brief and notified once, the next
// delivery is told a stall is under way, the stall's end is noted once,
// and the phase completes: nothing was stopped.
func TestStallWarnsAndTheTaskGoesOn(t *testing.T) {
	c, res, _ := runStalling(t, stalls.Warn, nil)
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus)
	require.Equal(t, 1, res.Attempt)
	require.Zero(t, c.aborts, "a warning stops nothing")

	require.True(t, c.delivers[0].WatchStalls)
	require.Equal(t, 5*time.Second, c.delivers[0].StallAfter)
	require.Equal(t, "warn", c.delivers[0].OnStall)
	require.False(t, c.delivers[0].Stalled)
	require.True(t, c.delivers[1].Stalled, "the delivery after the stall knows of it")
	require.Equal(t, c.t0, c.delivers[1].ProgressAt)
	require.False(t, c.delivers[2].Stalled, "progress ended the stall")

	stalled := c.notesOf("stalled")
	require.Len(t, stalled, 1)
	require.Equal(t, "implement", stalled[0].Details["phase"])
	require.Equal(t, "warn", stalled[0].Details["action"])
	require.Contains(t, stalled[0].Reason, "phase implement stalled: no event and no agent output for 5s")
	// Every patch carries the whole log: the last one holds each note once.
	last := c.patches[len(c.patches)-1]
	require.Equal(t, 1, strings.Count(last, `"action":"stalled"`), "one note of the stall")
	require.Equal(t, 1, strings.Count(last, `"action":"stall_ended"`), "one note of its end")
	require.Contains(t, last, "phase implement shows progress again after 9s")
}

// redispatch: the stalled attempt's conductor is stopped and attempt 2
// starts, which completes.
func TestStallRedispatchesAsAttemptTwo(t *testing.T) {
	c, res, _ := runStalling(t, stalls.Redispatch, nil)
	require.Equal(t, mapping.TaskCompleted, res.Outcome.TaskStatus)
	require.Equal(t, 2, res.Attempt)
	require.Equal(t, []int{1, 2}, c.starts)
	require.Equal(t, 1, c.aborts)
	require.Len(t, res.Attempts, 2)
	require.Equal(t, taskapi.EndedRedispatched, res.Attempts[0].Ended)
	require.Contains(t, res.Attempts[0].LastError, "phase implement stalled")
	require.Contains(t, res.Attempts[0].LastError, "redispatching as attempt 2")
	require.Len(t, c.notesOf("stalled"), 1)
	require.Equal(t, "redispatch", c.notesOf("stalled")[0].Details["action"])
}

// abort: the task ends aborted, and its reason names the stall.
func TestStallAbortsTheTask(t *testing.T) {
	c, res, _ := runStalling(t, stalls.Abort, nil)
	require.Equal(t, mapping.TaskBlocked, res.Outcome.TaskStatus)
	require.Equal(t, mapping.PlanAborted, res.Outcome.PlanStatus)
	require.Equal(t, "Plan aborted on a stall: phase implement showed no progress (no event and no agent output) for 5s", res.Outcome.LastError)
	require.Equal(t, taskapi.EndedAborted, res.Attempts[0].Ended)
	require.Equal(t, []int{1}, c.starts)
	require.Equal(t, 1, c.aborts)
	require.Equal(t, []mapping.TaskStatus{mapping.TaskBlocked}, c.statuses[len(c.statuses)-1:])
}

// A redispatch on the last attempt the dispatch allows aborts instead: a
// phase that stalls on every attempt does not loop for ever.
func TestStallRedispatchOnTheLastAttemptAborts(t *testing.T) {
	one := 1
	_, res, _ := runStalling(t, stalls.Redispatch, func(d *mapping.DispatchPlan) {
		d.ControlsSnapshot = &mapping.Controls{MaxReviewAttempts: &one}
	})
	require.Equal(t, 1, res.Attempt)
	require.True(t, mapping.IsAbort(res.Outcome.LastError), res.Outcome.LastError)
}
