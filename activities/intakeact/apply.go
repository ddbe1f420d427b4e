package intakeact

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/intent"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/intake"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
)

// Apply carries out one action of the intake. Every kind is idempotent,
// since a retry, or a replay after the worker was killed, may send it
// again, and acts only on workflows of its own claim: the intake marks
// each workflow it starts with its claim (MemoClaim), so a start finds
// its own workflow already there (done), a workflow of the same id
// someone else started and still runs (the task is refused and blocked on
// karvi with the reason, ApplyResult.Refused), or one that closed (the
// past: the board's task is started anew after it). A redispatch starts
// a new workflow only when the last one closed and was not itself this
// redispatch (the attempt is in its memo); abort, pause and resume asked
// twice do nothing more, and reach only the claim's own workflow; a block
// already written is seen on the board. Actions of an intake from before
// the marks (no owner or no key) keep the checks they had then.
func (a *Activities) Apply(ctx context.Context, in intakeapi.ApplyInput) (intakeapi.ApplyResult, error) {
	act := in.Action
	var res intakeapi.ApplyResult
	var err error
	switch act.Kind {
	case intake.KindStart:
		res, err = a.start(ctx, in)
	case intake.KindRedispatch:
		res, err = a.redispatch(ctx, in)
	case intake.KindAbort:
		res.Result, err = a.abort(ctx, in)
	case intake.KindBlock:
		res.Result, err = a.block(ctx, in.BoardURL, act.TaskID, act.Reason)
	case intake.KindStartRun:
		res, err = a.startRun(ctx, in)
	case intake.KindPauseRun, intake.KindResumeRun:
		res.Result, err = a.pauseRun(ctx, act)
	default:
		return intakeapi.ApplyResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown action kind %q", act.Kind), "BadAction", nil)
	}
	return res, err
}

// tuning is the tuning of a task or run the intake starts: none at real
// time, else the intake's time scale (the worker's when the intake's
// input names none).
func (a *Activities) tuning(in intakeapi.ApplyInput) *taskapi.Tuning {
	s := timescale.Scale(in.TimeScale)
	if !s.Scaled() {
		s = a.Scale
	}
	return taskapi.WithScale(nil, s)
}

// MemoClaim is the memo key of the intake's mark on a workflow it
// started: the intake (its workflow id and first run id, ApplyInput.Owner)
// and the claim's key, so the intake tells its own workflow from another
// of the same id.
const MemoClaim = "karviIntakeClaim"

// claimMark is the mark of a claim's workflows.
func claimMark(owner string, key int64) string { return owner + "#" + strconv.FormatInt(key, 10) }

// keyed reports whether an action (or claim) can be checked by its mark:
// one from an intake before the marks has no owner or no key.
func keyed(owner string, key int64) bool { return owner != "" && key != 0 }

// marked reports whether a workflow carries the claim's mark.
func marked(info *workflowpb.WorkflowExecutionInfo, owner string, key int64) bool {
	return memoString(info.GetMemo().GetFields(), MemoClaim) == claimMark(owner, key)
}

// startedBy says who started a workflow that is not the claim's, for the
// reason a person reads on karvi.
func startedBy(info *workflowpb.WorkflowExecutionInfo, owner string) string {
	fields := info.GetMemo().GetFields()
	if mark := memoString(fields, MemoClaim); mark != "" {
		theirs, _, _ := strings.Cut(mark, "/")
		ours, _, _ := strings.Cut(owner, "/")
		if theirs == ours {
			return "by this board's intake for an earlier task of the same id"
		}
		return "by the karvi intake " + theirs + " (another board on this namespace)"
	}
	if _, ok := fields[MemoAttempt]; ok {
		return "by a karvi intake"
	}
	if p := info.GetParentExecution().GetWorkflowId(); p != "" {
		return "by run " + p
	}
	if memoString(fields, intentapi.MemoIntent) != "" {
		return "by schedule intent " + memoString(fields, intentapi.MemoIntent)
	}
	return "by hand or by another client (`starter start`)"
}

// inUse is the reason a board task is refused when its workflow id runs
// for someone else.
func inUse(id string, info *workflowpb.WorkflowExecutionInfo, owner string) string {
	return fmt.Sprintf("workflow %s is already running (run %s) and was not started by this intake for this board task: it was started %s. "+
		"The intake does not take over a run it did not start; abort that run or let it end, then move the task back to dispatched",
		id, info.GetExecution().GetRunId(), startedBy(info, owner))
}

// refuse blocks a board task the intake will not run, with the reason,
// and answers the refusal. A block karvi refuses for good (the task gone
// or moved on) is noted: the task is not run either way.
func (a *Activities) refuse(ctx context.Context, in intakeapi.ApplyInput, taskID, reason string) (intakeapi.ApplyResult, error) {
	res, err := a.block(ctx, in.BoardURL, taskID, reason)
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.NonRetryable():
		res = "blocking it on karvi failed: " + err.Error()
	case err != nil:
		return intakeapi.ApplyResult{}, err
	}
	return intakeapi.ApplyResult{Result: "not run: " + reason + "; " + res, Refused: reason}, nil
}

// tasks and runs are the clients of the workflows the intake starts on
// queue.
func (a *Activities) tasks(queue string) taskapi.Tasks {
	return taskapi.Tasks{Client: a.Temporal, TaskQueue: queue}
}

func (a *Activities) runs(queue string) runapi.Runs {
	return runapi.Runs{Client: a.Temporal, TaskQueue: queue}
}

// launch starts the task's workflow for the claim, at attempt, marked
// with it; neverUsed refuses an id used before. A workflow of the id
// started meanwhile (a race with someone else's start) is an error: the
// retry decides again.
func (a *Activities) launch(ctx context.Context, in intakeapi.ApplyInput, attempt int, neverUsed bool) (string, error) {
	act := in.Action
	if act.Dispatch == nil {
		return "", temporal.NewNonRetryableApplicationError(string(act.Kind)+" of task "+act.TaskID+" without a dispatch plan", "BadAction", nil)
	}
	id := taskapi.WorkflowID(act.TaskID)
	tin := taskapi.TaskInput{Dispatch: *act.Dispatch, Attempt: max(attempt, 1), Tuning: a.tuning(in)}
	memo := map[string]any{MemoAttempt: act.Attempt}
	if keyed(in.Owner, act.Key) {
		memo[MemoClaim] = claimMark(in.Owner, act.Key)
	}
	run, err := a.tasks(in.TaskQueue).Start(ctx, tin, taskapi.StartOptions{Memo: memo, NeverUsed: neverUsed})
	if err != nil {
		return "", fmt.Errorf("start workflow %s: %w", id, err)
	}
	return fmt.Sprintf("started %s run %s (attempt %d)", id, run.GetRunID(), tin.Attempt), nil
}

// afterClosed starts the claim's workflow after a closed one of the same
// id that is not the claim's: the board's task is run, at the attempt
// after that one's.
func (a *Activities) afterClosed(ctx context.Context, in intakeapi.ApplyInput, info *workflowpb.WorkflowExecutionInfo) (intakeapi.ApplyResult, error) {
	id, runID := taskapi.WorkflowID(in.Action.TaskID), info.GetExecution().GetRunId()
	res, err := a.launch(ctx, in, a.tasks("").NextAttempt(ctx, in.Action.TaskID, runID, in.Action.Attempt), false)
	if err != nil {
		return intakeapi.ApplyResult{}, err
	}
	return intakeapi.ApplyResult{Result: fmt.Sprintf("%s already ran (run %s, %s, started %s), not for this board task: %s",
		id, runID, closeWords(info.GetStatus()), startedBy(info, in.Owner), res)}, nil
}

func (a *Activities) start(ctx context.Context, in intakeapi.ApplyInput) (intakeapi.ApplyResult, error) {
	act := in.Action
	if !keyed(in.Owner, act.Key) {
		return a.startUnmarked(ctx, in)
	}
	id := taskapi.WorkflowID(act.TaskID)
	desc, err := a.tasks("").Describe(ctx, act.TaskID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		res, err := a.launch(ctx, in, act.Attempt, true)
		return intakeapi.ApplyResult{Result: res}, err
	case err != nil:
		return intakeapi.ApplyResult{}, fmt.Errorf("describe %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	switch {
	case marked(info, in.Owner, act.Key):
		return intakeapi.ApplyResult{Result: fmt.Sprintf("already started: %s run %s is this claim's", id, info.GetExecution().GetRunId())}, nil
	case info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return a.refuse(ctx, in, act.TaskID, inUse(id, info, in.Owner))
	}
	return a.afterClosed(ctx, in, info)
}

// startUnmarked is the start of an intake from before the marks: the
// start refuses a workflow id ever used, and "already exists" is taken as
// done.
func (a *Activities) startUnmarked(ctx context.Context, in intakeapi.ApplyInput) (intakeapi.ApplyResult, error) {
	id := taskapi.WorkflowID(in.Action.TaskID)
	res, err := a.launch(ctx, in, 1, true)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return intakeapi.ApplyResult{Result: fmt.Sprintf("not started again: workflow %s already exists (run %s)", id, started.RunId)}, nil
	}
	return intakeapi.ApplyResult{Result: res}, err
}

func (a *Activities) redispatch(ctx context.Context, in intakeapi.ApplyInput) (intakeapi.ApplyResult, error) {
	act := in.Action
	id := taskapi.WorkflowID(act.TaskID)
	if act.WorkflowID != id {
		return a.redispatchInRun(ctx, in)
	}
	desc, err := a.tasks("").Describe(ctx, act.TaskID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		if !keyed(in.Owner, act.Key) {
			return a.startUnmarked(ctx, in)
		}
		res, err := a.launch(ctx, in, act.Attempt, true)
		return intakeapi.ApplyResult{Result: res}, err
	}
	if err != nil {
		return intakeapi.ApplyResult{}, fmt.Errorf("describe %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	running := info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if keyed(in.Owner, act.Key) && !marked(info, in.Owner, act.Key) {
		if running {
			return a.refuse(ctx, in, act.TaskID, inUse(id, info, in.Owner))
		}
		return a.afterClosed(ctx, in, info)
	}
	if memoAttempt(info.GetMemo().GetFields()) >= act.Attempt {
		return intakeapi.ApplyResult{Result: fmt.Sprintf("already redispatched: run %s is dispatch %d", info.GetExecution().GetRunId(), act.Attempt)}, nil
	}
	if running {
		err := a.tasks("").Redispatch(ctx, act.TaskID, a.runOf(in, info), act.Reason)
		if err != nil {
			return intakeapi.ApplyResult{}, fmt.Errorf("signal redispatch to %s: %w", id, err)
		}
		return intakeapi.ApplyResult{Result: "signalled redispatch to the running " + id}, nil
	}
	res, err := a.launch(ctx, in, a.tasks("").NextAttempt(ctx, act.TaskID, info.GetExecution().GetRunId(), act.Attempt), false)
	return intakeapi.ApplyResult{Result: res}, err
}

// runOf is the run a signal for the claim goes to: the one described and
// found the claim's (so a workflow of the id started since is not
// reached), or, for an action from before the marks, the latest.
func (a *Activities) runOf(in intakeapi.ApplyInput, info *workflowpb.WorkflowExecutionInfo) string {
	if keyed(in.Owner, in.Action.Key) {
		return info.GetExecution().GetRunId()
	}
	return ""
}

// redispatchInRun redispatches a task of a run (act.WorkflowID is the
// run's). While the run runs and the task failed or paused in it, the run
// is asked to retry it, as `starter run retry` does: the run gives it new
// attempts, its status.json follows and its dependents run after it.
// Otherwise (the run ended, or the task completed in it) the task runs
// again on its own, with the next attempt, under its own workflow id (the
// run's child of that id has closed); the run knows nothing of it. A task
// the run runs again already (a retry sent before) is left to the run.
func (a *Activities) redispatchInRun(ctx context.Context, in intakeapi.ApplyInput) (intakeapi.ApplyResult, error) {
	act := in.Action
	runID := act.WorkflowID
	runs := a.runs("")
	desc, err := runs.Describe(ctx, runapi.SlugOf(runID))
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return intakeapi.ApplyResult{}, fmt.Errorf("describe run %s: %w", runID, err)
	}
	if err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		doc, err := runs.Status(ctx, runapi.SlugOf(runID))
		if err != nil {
			return intakeapi.ApplyResult{}, fmt.Errorf("query status of run %s: %w", runID, err)
		}
		state := runstatus.TaskState("not a task")
		if t := doc.Tasks[act.TaskID]; t != nil {
			state = t.Status
		}
		switch state {
		case runstatus.TaskFailed, runstatus.TaskPaused, runstatus.TaskNeedsHumanRebase:
			res, err := a.retryInRun(ctx, runID, runapi.TaskRequest{Task: act.TaskID, Reason: act.Reason})
			return intakeapi.ApplyResult{Result: res}, err
		case runstatus.TaskDone, runstatus.TaskSkipped:
		default:
			return intakeapi.ApplyResult{Result: fmt.Sprintf("not redispatched: task %s is %s in run %s, which runs it", act.TaskID, state, runID)}, nil
		}
	}
	id := taskapi.WorkflowID(act.TaskID)
	tdesc, err := a.tasks("").Describe(ctx, act.TaskID, "")
	var out intakeapi.ApplyResult
	switch {
	case errors.As(err, &nf):
		// The run never started it.
		if !keyed(in.Owner, act.Key) {
			out, err = a.startUnmarked(ctx, in)
		} else {
			out.Result, err = a.launch(ctx, in, act.Attempt, true)
		}
	case err != nil:
		return intakeapi.ApplyResult{}, fmt.Errorf("describe %s: %w", id, err)
	default:
		info := tdesc.GetWorkflowExecutionInfo()
		running := info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		if keyed(in.Owner, act.Key) && !ofRun(info, runID) && !marked(info, in.Owner, act.Key) {
			if running {
				return a.refuse(ctx, in, act.TaskID, inUse(id, info, in.Owner))
			}
			out, err = a.afterClosed(ctx, in, info)
			break
		}
		if memoAttempt(info.GetMemo().GetFields()) >= act.Attempt {
			return intakeapi.ApplyResult{Result: fmt.Sprintf("already redispatched: run %s is dispatch %d", info.GetExecution().GetRunId(), act.Attempt)}, nil
		}
		if running {
			return intakeapi.ApplyResult{Result: fmt.Sprintf("not redispatched: %s is running (run %s started it)", id, runID)}, nil
		}
		out.Result, err = a.launch(ctx, in, a.tasks("").NextAttempt(ctx, act.TaskID, info.GetExecution().GetRunId(), act.Attempt), false)
	}
	if err != nil {
		return intakeapi.ApplyResult{}, err
	}
	out.Result += ", outside run " + runID + ": the run's status.json is not changed and its dependents do not run again"
	return out, nil
}

// ofRun reports whether a task workflow is a child of the run workflow
// runID (its parent survives the child's continue-as-new).
func ofRun(info *workflowpb.WorkflowExecutionInfo, runID string) bool {
	return info.GetParentExecution().GetWorkflowId() == runID
}

// retryInRun sends the retry update for one task to a running run.
func (a *Activities) retryInRun(ctx context.Context, runID string, req runapi.TaskRequest) (string, error) {
	err := a.runs("").Update(ctx, runapi.SlugOf(runID), runapi.UpdateRetry, req)
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr):
		// The run refused it (the task changed since the query): a retry
		// of this action would be refused the same way.
		return "retry of task " + req.Task + " refused by run " + runID + ": " + appErr.Message(), nil
	case err != nil:
		return "", fmt.Errorf("retry task %s in run %s: %w", req.Task, runID, err)
	}
	return "retried task " + req.Task + " in run " + runID, nil
}

// abort aborts a task's workflow. A task of a run runs in a workflow of
// its own id too (the run's child), so the same signal aborts it, and the
// run then does what it does for any aborted task: the task fails, its
// dependents are blocked, the rest of the run goes on. A run's task the
// run has not started yet is aborted by the follower as soon as the run
// starts it (Follow: the claim stays marked aborted until its workflow
// ends). Only the claim's own workflow is signalled (its mark, or the
// run as its parent): a workflow of the same id that someone else
// started, another board's say, is left alone.
func (a *Activities) abort(ctx context.Context, in intakeapi.ApplyInput) (string, error) {
	act := in.Action
	id := taskapi.WorkflowID(act.TaskID)
	inRun := act.WorkflowID != id
	runID := ""
	if keyed(in.Owner, act.Key) {
		desc, err := a.tasks("").Describe(ctx, act.TaskID, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf) && inRun:
			return "task " + act.TaskID + " of run " + act.WorkflowID + " has not started yet: aborted when the run starts it", nil
		case errors.As(err, &nf):
			return "nothing to abort: " + id + " is not running", nil
		case err != nil:
			return "", fmt.Errorf("describe %s: %w", id, err)
		}
		info := desc.GetWorkflowExecutionInfo()
		ours := marked(info, in.Owner, act.Key) || inRun && ofRun(info, act.WorkflowID)
		switch {
		case !ours && inRun:
			return fmt.Sprintf("not aborted: %s (run %s) was not started by run %s; the task is aborted when the run starts it",
				id, info.GetExecution().GetRunId(), act.WorkflowID), nil
		case !ours:
			return fmt.Sprintf("not aborted: %s (run %s) is not this board task's workflow, it was started %s",
				id, info.GetExecution().GetRunId(), startedBy(info, in.Owner)), nil
		case info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			return "nothing to abort: " + id + " is not running", nil
		}
		runID = info.GetExecution().GetRunId()
	}
	err := a.tasks("").Abort(ctx, act.TaskID, runID, act.Reason)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf) && runID != "":
		// The run described closed or continued as new since: decide again.
		return "", fmt.Errorf("signal abort to %s run %s: %w", id, runID, err)
	case errors.As(err, &nf) && inRun:
		return "task " + act.TaskID + " of run " + act.WorkflowID + " has not started yet: aborted when the run starts it", nil
	case errors.As(err, &nf):
		return "nothing to abort: " + id + " is not running", nil
	case err != nil:
		return "", fmt.Errorf("signal abort to %s: %w", id, err)
	}
	if inRun {
		return "sent abort to " + id + " (a task of run " + act.WorkflowID + ")", nil
	}
	return "sent abort to " + id, nil
}

// block marks a task the intake cannot run blocked on karvi with the
// reason. karvi refuses dispatched -> blocked, so it goes through
// in_progress.
func (a *Activities) block(ctx context.Context, boardURL, taskID, reason string) (string, error) {
	kc, err := a.Karvi(boardURL)
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError(err.Error(), "BadBoardURL", err)
	}
	t, err := kc.GetTaskFresh(ctx, taskID)
	if err != nil {
		return "", a.karviErr(err)
	}
	switch t.Status {
	case intake.StatusBlocked:
		return "already blocked", nil
	case intake.StatusDispatched:
		if err := kc.SetTaskStatus(ctx, taskID, intake.StatusInProgress, ""); err != nil {
			return "", a.karviErr(err)
		}
	case intake.StatusInProgress:
	default:
		return fmt.Sprintf("not blocked: the task is %s on karvi now (reason was: %s)", t.Status, reason), nil
	}
	if err := kc.SetTaskStatus(ctx, taskID, intake.StatusBlocked, reason); err != nil {
		return "", a.karviErr(err)
	}
	return "blocked on karvi: " + reason, nil
}

// karviErr makes a karvi refusal that a retry cannot change (an illegal
// transition, a task gone) non-retryable; the rest is retried.
func (a *Activities) karviErr(err error) error {
	switch karvi.KindOf(err) {
	case karvi.KindTransient, karvi.KindConflict:
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "KarviRefused", err)
}

// startRun starts a project's run, marked with the run's claim. A run
// workflow of the id that is not the claim's, running or closed, refuses
// the project and blocks its tasks: a run's task workflows are known by
// the run id as their parent, and the old run's would be taken for the
// new one's.
func (a *Activities) startRun(ctx context.Context, in intakeapi.ApplyInput) (intakeapi.ApplyResult, error) {
	act := in.Action
	if _, err := runplan.Parse(act.RunFile); err != nil {
		return intakeapi.ApplyResult{}, temporal.NewNonRetryableApplicationError("start_run of project "+act.ProjectID+": "+err.Error(), "BadAction", err)
	}
	opts := runapi.StartOptions{NeverUsed: true}
	if keyed(in.Owner, act.Key) {
		opts.Memo = map[string]any{MemoClaim: claimMark(in.Owner, act.Key)}
	}
	runs := a.runs(in.TaskQueue)
	run, err := runs.Start(ctx, runapi.RunInput{Run: act.RunFile, TaskQueue: in.TaskQueue, Tuning: a.tuning(in)}, opts)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	res := ""
	switch {
	case errors.As(err, &started) && keyed(in.Owner, act.Key):
		desc, err := runs.Describe(ctx, runapi.SlugOf(act.WorkflowID))
		if err != nil {
			return intakeapi.ApplyResult{}, fmt.Errorf("describe run %s: %w", act.WorkflowID, err)
		}
		info := desc.GetWorkflowExecutionInfo()
		if !marked(info, in.Owner, act.Key) {
			return a.refuseRun(ctx, in, info)
		}
		res = fmt.Sprintf("not started again: run %s already exists (run %s)", act.WorkflowID, started.RunId)
	case errors.As(err, &started):
		res = fmt.Sprintf("not started again: run %s already exists (run %s)", act.WorkflowID, started.RunId)
	case err != nil:
		return intakeapi.ApplyResult{}, fmt.Errorf("start run %s: %w", act.WorkflowID, err)
	default:
		res = fmt.Sprintf("started run %s (run %s)", act.WorkflowID, run.GetRunID())
	}
	if act.Paused {
		r, err := a.update(ctx, act.WorkflowID, runapi.UpdatePause)
		if err != nil {
			return intakeapi.ApplyResult{}, err
		}
		res += "; " + r
	}
	return intakeapi.ApplyResult{Result: res}, nil
}

// refuseRun refuses a project whose run workflow id someone else used and
// blocks each of its tasks on karvi with the reason.
func (a *Activities) refuseRun(ctx context.Context, in intakeapi.ApplyInput, info *workflowpb.WorkflowExecutionInfo) (intakeapi.ApplyResult, error) {
	act := in.Action
	how := "is already running"
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		how = "already ran (" + closeWords(info.GetStatus()) + ")"
	}
	reason := fmt.Sprintf("run workflow %s %s (run %s) and was not started by this intake for project %s: it was started %s. "+
		"Post the tasks again in a new project",
		act.WorkflowID, how, info.GetExecution().GetRunId(), act.ProjectID, startedBy(info, in.Owner))
	run, err := runplan.Parse(act.RunFile)
	if err != nil {
		return intakeapi.ApplyResult{}, temporal.NewNonRetryableApplicationError("start_run of project "+act.ProjectID+": "+err.Error(), "BadAction", err)
	}
	results := []string{"not run: " + reason}
	for _, t := range run.Tasks {
		res, err := a.refuse(ctx, in, t.ID, reason)
		if err != nil {
			return intakeapi.ApplyResult{}, err
		}
		results = append(results, "task "+t.ID+": "+strings.TrimPrefix(res.Result, "not run: "+reason+"; "))
	}
	return intakeapi.ApplyResult{Result: strings.Join(results, "; "), Refused: reason}, nil
}

func (a *Activities) pauseRun(ctx context.Context, act intake.Action) (string, error) {
	name := runapi.UpdatePause
	if act.Kind == intake.KindResumeRun {
		name = runapi.UpdateResume
	}
	return a.update(ctx, act.WorkflowID, name)
}

func (a *Activities) update(ctx context.Context, workflowID, name string) (string, error) {
	err := a.runs("").Update(ctx, runapi.SlugOf(workflowID), name, nil)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "not " + name + "d: run " + workflowID + " is not running", nil
	}
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			// The run refused it (already paused, say): nothing to retry.
			return name + " refused by " + workflowID + ": " + appErr.Message(), nil
		}
		return "", fmt.Errorf("%s %s: %w", name, workflowID, err)
	}
	return name + "d " + workflowID, nil
}
