package intakeflow

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/intake"
	"karvi-edda-temporal/internal/metrics"
	"karvi-edda-temporal/internal/timescale"
)

// Register adds the intake workflow to a worker or replayer under its
// stable name.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(IntakeWorkflow, workflow.RegisterOptions{Name: intakeapi.WorkflowName})
}

// Timings of the intake's activities.
const (
	// followWait is how long one follow waits for news before it returns
	// empty, so the workflow checks continue-as-new now and then.
	followWait = 5 * time.Minute
	// unauthorizedWait is how long the intake waits after karvi refused
	// its token before it tries again.
	unauthorizedWait = 2 * time.Minute
	// failedWait is how long it waits after a follow failed for good.
	failedWait = time.Minute
)

// The input's time scale divides each of these (intakeapi.Input.TimeScale).

// IntakeWorkflow follows one karvi board. Each tick asks the follow
// activity for what is new (a board that asks for something, task
// workflows that ended), runs intake.Reconcile on it, keeps the new state
// and carries out the actions one by one. The state is the workflow's:
// a claim is recorded by the same workflow task that schedules its start,
// and the start itself is idempotent by workflow id, so a worker killed at
// any point neither loses nor doubles a task.
func IntakeWorkflow(ctx workflow.Context, in intakeapi.Input) error {
	if in.BoardURL == "" {
		return temporal.NewNonRetryableApplicationError("intake input: boardUrl is required", "BadInput", nil)
	}
	if in.TaskQueue == "" {
		in.TaskQueue = workflow.GetInfo(ctx).TaskQueueName
	}
	if in.RuntimeHint == "" {
		in.RuntimeHint = intake.DefaultRuntimeHint
	}
	scale := timescale.Scale(in.TimeScale)
	poll := in.Poll
	if poll <= 0 {
		poll = scale.Of(intakeapi.DefaultPoll)
	}
	ticks := in.TicksBeforeContinue
	if ticks <= 0 {
		ticks = intakeapi.DefaultTicks
	}
	logger := workflow.GetLogger(ctx)
	// The intake's name on the workflows it starts: with a claim's key, it
	// tells them from workflows of the same id someone else started.
	info := workflow.GetInfo(ctx)
	owner := intakeapi.Owner(info.WorkflowExecution.ID, info.FirstRunID)
	problem := ""
	refused := false // karvi answers 401/403
	if err := workflow.SetQueryHandler(ctx, intakeapi.QueryStatus, func() (intakeapi.Status, error) {
		return intakeapi.Status{
			BoardURL: in.BoardURL, RuntimeHint: in.RuntimeHint, TaskQueue: in.TaskQueue,
			Version: in.State.Version, Claims: in.State.Claims, Runs: in.State.Runs,
			Skipped: in.Skipped, Recent: in.Recent, Problem: problem, Counts: in.Counts,
		}, nil
	}); err != nil {
		return err
	}

	followCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: followWait + 2*time.Minute,
		// Heartbeats come every 10 s: a follower on a killed worker is
		// given up (and started on another) within half a minute.
		HeartbeatTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute},
	})
	applyCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute},
	})

	for tick := 0; ; tick++ {
		if tick >= ticks || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			in.Counts.Continued++
			return workflow.NewContinueAsNewError(ctx, intakeapi.WorkflowName, in)
		}
		in.Counts.Ticks++
		var res intakeapi.FollowResult
		err := workflow.ExecuteActivity(followCtx, intakeapi.FollowActivity, intakeapi.FollowInput{
			BoardURL: in.BoardURL, RuntimeHint: in.RuntimeHint, TimeoutSec: in.TimeoutSec,
			State: in.State, Poll: poll, MaxWait: scale.Of(followWait), Skipped: in.Skipped, Problem: problem, Owner: owner,
		}).Get(ctx, &res)
		if err != nil {
			problem, refused = "following the board: "+err.Error(), false
			logger.Warn("intake: following the board failed", "error", err)
			if err := workflow.Sleep(ctx, scale.Of(failedWait)); err != nil {
				return err
			}
			continue
		}
		kind := metrics.IntakeOK
		switch {
		case res.Unauthorized:
			kind = metrics.IntakeUnauthorized
		case res.Problem != "":
			kind = metrics.IntakeUnreachable
		}
		began := res.Problem != "" && res.Problem != problem
		if began {
			in.Counts.Unreachable++
			logger.Warn("intake: karvi cannot be read", "problem", res.Problem, "kind", kind)
		}
		metrics.IntakeKarvi(workflow.GetMetricsHandler(ctx), in.BoardURL, kind, began)
		problem, refused = res.Problem, res.Unauthorized
		workflow.SetCurrentDetails(ctx, details(in, problem, refused))
		for _, e := range res.Ended {
			in.State = in.State.EndedAs(e.TaskID, e.Final, e.RunID)
			in.Counts.EndsSeen++
			remember(&in, intakeapi.Note{Kind: "ended", TaskID: e.TaskID, Result: endWords(e), At: workflow.Now(ctx)})
		}
		if res.Unauthorized {
			if err := workflow.Sleep(ctx, scale.Of(unauthorizedWait)); err != nil {
				return err
			}
			continue
		}
		if len(res.Board) == 0 {
			continue
		}
		b, err := intake.DecodeBoard(res.Board)
		if err != nil {
			problem = "karvi's board: " + err.Error()
			continue
		}
		in.Counts.BoardsRead++
		actions, next := intake.Reconcile(b, in.State, in.Config())
		// The claims are the workflow's from here on: the actions below
		// are carried out by idempotent activities, so a replay after a
		// crash re-sends at most what was already done, never a new claim.
		in.State = next
		var skipped []intakeapi.Note
		for _, a := range actions {
			note := intakeapi.Note{Kind: a.Kind, TaskID: a.TaskID, ProjectID: a.ProjectID, Reason: a.Reason, At: workflow.Now(ctx)}
			if a.Kind == intake.KindIgnore {
				skipped = append(skipped, note)
				if !known(in.Skipped, note) {
					logger.Info("intake: skipped", "task", a.TaskID, "project", a.ProjectID, "reason", a.Reason)
				}
				continue
			}
			var ar intakeapi.ApplyResult
			err := workflow.ExecuteActivity(applyCtx, intakeapi.ApplyActivity, intakeapi.ApplyInput{
				BoardURL: in.BoardURL, TaskQueue: in.TaskQueue, Owner: owner, Action: a, TimeScale: in.TimeScale,
			}).Get(ctx, &ar)
			if err != nil {
				in.Counts.Failed++
				note.Result = "failed: " + err.Error()
				logger.Error("intake: action failed", "kind", a.Kind, "task", a.TaskID, "project", a.ProjectID, "error", err)
			} else {
				note.Result = ar.Result
				logger.Info("intake: "+string(a.Kind), "task", a.TaskID, "project", a.ProjectID, "result", ar.Result)
				if ar.Refused == "" {
					count(&in.Counts, a.Kind)
				} else {
					// Its workflow id is someone else's: the task was
					// blocked, not run, and the intake holds no claim on
					// it any more.
					in.Counts.Blocked++
					if a.Kind == intake.KindStartRun {
						in.State = in.State.RefusedRun(a.ProjectID, ar.Refused)
					} else {
						in.State = in.State.Refused(a.TaskID, ar.Refused)
					}
				}
			}
			remember(&in, note)
		}
		in.Skipped = skipped
		workflow.SetCurrentDetails(ctx, details(in, problem, refused))
	}
}

// details are what the Web UI shows of the intake now: karvi's problem
// first, when it has one.
func details(in intakeapi.Input, problem string, refused bool) string {
	running := 0
	for _, c := range in.State.Claims {
		if c.Phase == intake.PhaseRunning {
			running++
		}
	}
	out := fmt.Sprintf("Follows **%s** (runtimeHint `%s`), board _version %d: %d tasks claimed, %d running, %d runs; %d skipped.",
		in.BoardURL, in.RuntimeHint, in.State.Version, len(in.State.Claims), running, len(in.State.Runs), len(in.Skipped))
	switch {
	case refused:
		out = fmt.Sprintf("**karvi refuses the intake's token (401/403)**: nothing is claimed; asking again every %s. Give the worker an operator token (KARVI_API_TOKEN).\n\n",
			timescale.Scale(in.TimeScale).Of(unauthorizedWait)) + out
	case problem != "":
		out = "**karvi cannot be read**: nothing new is claimed (what is dispatched meanwhile stays dispatched on the board and is claimed once karvi answers); the tasks already claimed run on.\n\n" + out
	}
	if problem != "" {
		out += "\n\n**Problem:** " + problem
	}
	return out
}

// remember keeps a note among the recent ones, at most MaxRecent.
func remember(in *intakeapi.Input, n intakeapi.Note) {
	in.Recent = append(in.Recent, n)
	if over := len(in.Recent) - intakeapi.MaxRecent; over > 0 {
		in.Recent = append([]intakeapi.Note(nil), in.Recent[over:]...)
	}
}

func known(notes []intakeapi.Note, n intakeapi.Note) bool {
	for _, o := range notes {
		if intakeapi.SameNote(o, n) {
			return true
		}
	}
	return false
}

func count(c *intakeapi.Counts, k intake.Kind) {
	switch k {
	case intake.KindStart, intake.KindStartRun:
		c.Started++
	case intake.KindRedispatch:
		c.Redispatch++
	case intake.KindAbort:
		c.Aborted++
	case intake.KindBlock:
		c.Blocked++
	}
}

func endWords(e intakeapi.Ended) string {
	if e.Final == "" {
		return "workflow " + e.How
	}
	return "workflow " + e.How + ", task left " + e.Final
}
