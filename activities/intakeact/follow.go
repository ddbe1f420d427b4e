package intakeact

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/intake"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/timescale"
)

// Activities are the intake's activities.
type Activities struct {
	Temporal client.Client
	// Karvi makes the client of a board. The worker gives it its token
	// (KARVI_API_TOKEN) and rate limit, so neither is in any history.
	Karvi func(baseURL string) (*karvi.Client, error)
	// Scale is the worker's time scale: the tasks and runs an intake
	// started without one (Input.TimeScale) carry it.
	Scale timescale.Scale
}

// Register adds the activities under their stable names.
func (a *Activities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.Follow, activity.RegisterOptions{Name: intakeapi.FollowActivity})
	r.RegisterActivityWithOptions(a.Apply, activity.RegisterOptions{Name: intakeapi.ApplyActivity})
}

// heartbeatEvery is how often Follow heartbeats (the workflow's heartbeat
// timeout is 30 s).
const heartbeatEvery = 10 * time.Second

// Follow waits until there is something for the intake to do and returns
// it: task workflows of running claims that closed, or a board on which
// intake.Reconcile would act (or skip something else than the intake
// shows). It reads the board at once, so nothing written while the intake
// was down is missed, then follows the live feed, and reads the board
// again every Poll, since karvi's review writes the board without an
// event. karvi unreachable: it keeps trying and reports the problem;
// 401/403: it returns at once, Unauthorized.
func (a *Activities) Follow(ctx context.Context, in intakeapi.FollowInput) (intakeapi.FollowResult, error) {
	kc, err := a.Karvi(in.BoardURL)
	if err != nil {
		return intakeapi.FollowResult{}, temporal.NewNonRetryableApplicationError(err.Error(), "BadBoardURL", err)
	}
	poll := in.Poll
	if poll <= 0 {
		poll = a.Scale.Of(intakeapi.DefaultPoll)
	}
	maxWait := in.MaxWait
	if maxWait <= 0 {
		maxWait = a.Scale.Of(5 * time.Minute)
	}
	give := time.NewTimer(maxWait)
	defer give.Stop()

	fctx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	boards := make(chan []byte, 1)
	feedProblem := make(chan error, 1)
	go a.feed(fctx, kc, boards, feedProblem)

	problem := ""
	// check decides whether to return what was read. The task workflows
	// are described only on the first read and on poll ticks (withEnded),
	// not on every feed event: every write of every task makes one.
	check := func(raw []byte, readErr error, withEnded bool) (intakeapi.FollowResult, bool) {
		var ended []intakeapi.Ended
		if withEnded {
			var err error
			if ended, err = a.ended(ctx, in.State, in.Owner); err != nil {
				activity.GetLogger(ctx).Warn("intake: describing task workflows failed", "error", err)
			}
		}
		if readErr != nil {
			problem = "karvi " + in.BoardURL + ": " + readErr.Error()
			if karvi.IsUnauthorized(readErr) {
				return intakeapi.FollowResult{Ended: ended, Problem: problem, Unauthorized: true}, true
			}
			return intakeapi.FollowResult{Ended: ended, Problem: problem}, len(ended) > 0 || problem != in.Problem && in.Problem == ""
		}
		problem = ""
		// A board the rules cannot read is a problem, reported when it
		// is new: returned as a board, it would be returned again on
		// every read, each a tick in the workflow's history.
		trimmed, err := Trim(raw)
		if err == nil {
			_, err = intake.DecodeBoard(trimmed)
		}
		if err != nil {
			problem = "karvi " + in.BoardURL + ": " + err.Error()
			return intakeapi.FollowResult{Ended: ended, Problem: problem}, len(ended) > 0 || in.Problem != problem
		}
		res := intakeapi.FollowResult{Board: trimmed, Ended: ended}
		return res, len(ended) > 0 || in.Problem != "" || Interesting(trimmed, in)
	}
	raw, err := kc.GetBoard(ctx)
	if res, ok := check(raw, err, true); ok {
		return res, nil
	}
	feedWarned := false
	poller := time.NewTicker(poll)
	defer poller.Stop()
	beat := time.NewTicker(heartbeatEvery)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return intakeapi.FollowResult{}, ctx.Err()
		case <-give.C:
			return intakeapi.FollowResult{Problem: problem}, nil
		case <-beat.C:
			activity.RecordHeartbeat(ctx, problem)
		case err := <-feedProblem:
			// The board reads decide whether karvi can be read; a feed
			// that drops (or is refused: karvi takes 50 clients) only
			// makes the intake slower to notice, until the next poll.
			if karvi.IsUnauthorized(err) {
				res, _ := check(nil, err, false)
				return res, nil
			}
			if !feedWarned {
				feedWarned = true
				activity.GetLogger(ctx).Warn("intake: karvi's live feed failed; reading the board every poll meanwhile", "error", err)
			}
		case raw := <-boards:
			if res, ok := check(raw, nil, false); ok {
				return res, nil
			}
		case <-poller.C:
			raw, err := kc.GetBoard(ctx)
			if res, ok := check(raw, err, true); ok {
				return res, nil
			}
		}
	}
}

// feed follows karvi's live feed until ctx ends, handing on the newest
// board (each event carries the whole board, so an older one waiting is
// replaced) and reconnecting with backoff. A refusal by the feed is sent
// on problems; on reconnect the board is read again, since the feed
// cannot resume.
func (a *Activities) feed(ctx context.Context, kc *karvi.Client, boards chan []byte, problems chan error) {
	backoff := time.Second
	for ctx.Err() == nil {
		err := kc.FollowEvents(ctx, func(ev karvi.FeedEvent) error {
			backoff = time.Second
			switch ev.Name {
			case "board":
				offer(boards, ev.Data)
			case "connected":
				// Writes since the last read may have come without an
				// event reaching us: read the board.
				if raw, err := kc.GetBoard(ctx); err == nil {
					offer(boards, raw)
				}
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		select {
		case problems <- err:
		default:
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

func offer(ch chan []byte, b []byte) {
	for {
		select {
		case ch <- b:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// Interesting reports whether reconciling the board would do anything
// the intake has not done: an action, a state that differs in its claims
// or runs, or skips that differ from those it shows.
func Interesting(trimmed []byte, in intakeapi.FollowInput) bool {
	b, err := intake.DecodeBoard(trimmed)
	if err != nil {
		return true // the workflow reports it
	}
	actions, next := intake.Reconcile(b, in.State, in.Config())
	var skips []intakeapi.Note
	for _, a := range actions {
		if a.Kind != intake.KindIgnore {
			return true
		}
		skips = append(skips, intakeapi.Note{Kind: a.Kind, TaskID: a.TaskID, ProjectID: a.ProjectID, Reason: a.Reason})
	}
	if !reflect.DeepEqual(norm(next.Claims), norm(in.State.Claims)) || !reflect.DeepEqual(normRuns(next.Runs), normRuns(in.State.Runs)) {
		return true
	}
	if len(skips) != len(in.Skipped) {
		return true
	}
	for i := range skips {
		if !intakeapi.SameNote(skips[i], in.Skipped[i]) {
			return true
		}
	}
	return false
}

func norm(c []intake.Claim) []intake.Claim {
	if len(c) == 0 {
		return nil
	}
	return c
}

func normRuns(r []intake.RunClaim) []intake.RunClaim {
	if len(r) == 0 {
		return nil
	}
	return r
}

// ended describes the task workflow of every running claim and reports
// those that closed. A task of a run whose workflow the run has not
// started yet is not ended. A claim with a key (see intake.Claim.Key)
// follows only its own workflow: one of the same id someone else started
// is not the claim's (for a run's task, one the run did not start is not
// started yet); when someone else's is the latest, the claim's own has
// closed before it, and is reported ended with no status.
func (a *Activities) ended(ctx context.Context, st intake.State, owner string) ([]intakeapi.Ended, error) {
	var out []intakeapi.Ended
	var errs []error
	for _, c := range st.Claims {
		if c.Phase != intake.PhaseRunning {
			continue
		}
		id := taskapi.WorkflowID(c.TaskID)
		desc, err := a.tasks("").Describe(ctx, c.TaskID, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			if c.RunWorkflowID == "" {
				out = append(out, intakeapi.Ended{TaskID: c.TaskID, How: "not found"})
			}
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("describe %s: %w", id, err))
			continue
		}
		info := desc.GetWorkflowExecutionInfo()
		if keyed(owner, c.Key) && !marked(info, owner, c.Key) {
			if c.RunWorkflowID != "" && !ofRun(info, c.RunWorkflowID) {
				continue // not started by its run yet
			}
			if c.RunWorkflowID == "" {
				out = append(out, intakeapi.Ended{TaskID: c.TaskID, How: fmt.Sprintf("closed (%s run %s, the latest, was started %s)",
					id, info.GetExecution().GetRunId(), startedBy(info, owner))})
				continue
			}
		}
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			if c.Aborted && c.RunWorkflowID != "" {
				// Cancelled on the board before its run started it: the
				// run has now. The abort is idempotent in the task.
				runID := ""
				if keyed(owner, c.Key) {
					runID = info.GetExecution().GetRunId()
				}
				err := a.tasks("").Abort(ctx, c.TaskID, runID, "cancelled on the board before its run started it")
				if err != nil {
					errs = append(errs, fmt.Errorf("abort %s: %w", id, err))
				}
			}
			continue
		}
		if c.RunWorkflowID == "" && c.Attempt > 1 && memoAttempt(info.GetMemo().GetFields()) < c.Attempt {
			continue // the redispatch has not started its workflow yet
		}
		if c.Attempt > 1 && c.EndedRunID != "" && info.GetExecution().GetRunId() == c.EndedRunID {
			// Sent back, and neither the run nor the intake has started
			// the task's next workflow yet: this is the one that ended.
			continue
		}
		e := intakeapi.Ended{TaskID: c.TaskID, How: closeWords(info.GetStatus()), RunID: info.GetExecution().GetRunId()}
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			if r, err := a.tasks("").Result(ctx, c.TaskID, info.GetExecution().GetRunId()); err == nil {
				e.Final = string(r.Outcome.TaskStatus)
			}
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// MemoAttempt is the memo key of the intake's dispatch count on a task
// workflow it started.
const MemoAttempt = "karviIntakeAttempt"

func memoAttempt(fields map[string]*commonpb.Payload) int {
	p, ok := fields[MemoAttempt]
	if !ok {
		return 0
	}
	var n int
	if err := converter.GetDefaultDataConverter().FromPayload(p, &n); err != nil {
		return 0
	}
	return n
}

func memoString(fields map[string]*commonpb.Payload, key string) string {
	p, ok := fields[key]
	if !ok {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		return ""
	}
	return s
}

func closeWords(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "cancelled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	}
	return s.String()
}
