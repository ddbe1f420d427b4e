package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
)

// acts is only used for its method values: the compiler checks the activity
// names, and the worker resolves them to the registered implementations.
var acts *activities.Activities

// TaskWorkflow drives one karvi task through edda: it generates the plan,
// starts the conductor, turns every conductor event into a brief patch, and
// ends by setting the task's status. It owns the brief and the tail cursor, so
// a worker crash at any point neither loses nor repeats a brief update.
func TaskWorkflow(ctx workflow.Context, in TaskInput) (Result, error) {
	r, err := newTaskRun(ctx, in)
	if err != nil {
		return Result{}, err
	}
	if err := r.setup(); err != nil {
		return Result{}, err
	}
	return r.run()
}

type taskRun struct {
	ctx          workflow.Context
	log          log.Logger
	st           State
	abortCh      workflow.ReceiveChannel
	redispatchCh workflow.ReceiveChannel
	// searchPhase and searchPlan remember what was last upserted, so search
	// attributes are only written when they change.
	searchPhase, searchPlan, searchStatus string
}

func newTaskRun(ctx workflow.Context, in TaskInput) (*taskRun, error) {
	r := &taskRun{ctx: ctx, log: workflow.GetLogger(ctx)}
	if in.Carry != nil {
		r.st = *in.Carry
		r.st.ContinuedAsNew++
		return r, nil
	}
	// A bad dispatch fails here, before anything is written or started.
	if err := in.Dispatch.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("invalid dispatch plan: %v", err), activities.ErrInvalidDispatch, err)
	}
	attempt := in.Attempt
	if attempt < 1 {
		attempt = 1
	}
	r.st = State{
		Dispatch: in.Dispatch,
		Attempt:  attempt,
		Stage:    stagePrepare,
		Tuning:   in.Tuning,
	}
	if attempt > 1 {
		r.st.Dispatch.Mode = "redispatch"
	}
	return r, nil
}

func (r *taskRun) setup() error {
	r.abortCh = workflow.GetSignalChannel(r.ctx, SignalAbort)
	r.redispatchCh = workflow.GetSignalChannel(r.ctx, SignalRedispatch)
	if err := workflow.SetQueryHandler(r.ctx, QueryBrief, func() (mapping.Brief, error) {
		return r.st.Brief.Brief, nil
	}); err != nil {
		return fmt.Errorf("register brief query: %w", err)
	}
	if err := workflow.SetQueryHandler(r.ctx, QueryStatus, func() (Status, error) {
		return r.status(), nil
	}); err != nil {
		return fmt.Errorf("register status query: %w", err)
	}
	r.upsertSearch()
	return nil
}

func (r *taskRun) run() (Result, error) {
	for {
		r.drainSignals()
		if err := r.actOnSignals(); err != nil {
			return Result{}, err
		}
		var err error
		switch r.st.Stage {
		case stagePrepare:
			err = r.prepare()
		case stageStart:
			err = r.start()
		case stageRunning:
			err = r.tail()
		case stageFinish:
			err = r.finish()
		case stageDone:
			return r.result(), nil
		default:
			return Result{}, temporal.NewNonRetryableApplicationError(
				"unknown workflow stage "+r.st.Stage, "BadState", nil)
		}
		if err != nil {
			return Result{}, err
		}
		if r.st.Stage == stageRunning && r.shouldContinueAsNew() {
			r.drainSignals()
			if !r.st.PendingAbort && !r.st.PendingRedispatch {
				carry := r.st
				carry.Polls = 0
				return Result{}, workflow.NewContinueAsNewError(r.ctx, TaskWorkflowName,
					TaskInput{Dispatch: r.st.Dispatch, Tuning: r.st.Tuning, Carry: &carry})
			}
		}
	}
}

func (r *taskRun) shouldContinueAsNew() bool {
	info := workflow.GetInfo(r.ctx)
	if info.GetContinueAsNewSuggested() {
		return true
	}
	limit := r.st.Tuning.continueAsNewAfterPolls()
	return limit > 0 && r.st.Polls >= limit
}

// drainSignals takes every signal already delivered without blocking.
func (r *taskRun) drainSignals() {
	for {
		var a AbortSignal
		if r.abortCh.ReceiveAsync(&a) {
			r.noteSignal(SignalAbort, a.Reason)
			continue
		}
		var d RedispatchSignal
		if r.redispatchCh.ReceiveAsync(&d) {
			r.noteSignal(SignalRedispatch, d.Reason)
			continue
		}
		return
	}
}

func (r *taskRun) noteSignal(name, reason string) {
	r.st.SignalsReceived++
	if r.st.PendingAbort || r.st.PendingRedispatch {
		// Folded into the decision already pending for this burst.
		r.st.SignalsIgnored++
	}
	if name == SignalAbort {
		r.st.PendingAbort = true
	} else {
		r.st.PendingRedispatch = true
	}
	r.log.Info("signal received", "signal", name, "reason", reason, "stage", r.st.Stage)
}

// takePending returns the action a burst of signals decided (abort beats
// redispatch) and clears it.
func (r *taskRun) takePending() string {
	action := ""
	switch {
	case r.st.PendingAbort:
		action = SignalAbort
	case r.st.PendingRedispatch:
		action = SignalRedispatch
	}
	r.st.PendingAbort, r.st.PendingRedispatch = false, false
	return action
}

// actOnSignals applies the pending action to the current stage. In the
// finish stage the outcome is final: finish() decides there.
func (r *taskRun) actOnSignals() error {
	if r.st.Stage == stageFinish || r.st.Stage == stageDone {
		return nil
	}
	action := r.takePending()
	if action == "" {
		return nil
	}
	if r.st.Stage == stageRunning {
		completed, err := r.stopConductor()
		if err != nil {
			return err
		}
		if completed != nil && action == SignalAbort {
			// The conductor finished before the abort could reach it: the
			// truth is the conductor's, and the abort had nothing to stop.
			r.st.SignalsIgnored++
			r.st.Outcome = completed
			r.st.Stage = stageFinish
			return nil
		}
	}
	if action == SignalAbort {
		o := mapping.AbortedOutcome()
		r.st.Outcome = &o
		r.st.Stage = stageFinish
		return nil
	}
	r.endAttempt("redispatched", "")
	r.newAttempt()
	return nil
}

// newAttempt moves to the next attempt: a new plan name (so a new conductor
// state directory) and REDISPATCH=1 on every phase.
func (r *taskRun) newAttempt() {
	r.st.Attempt++
	r.st.Dispatch.Mode = "redispatch"
	r.st.Stage = stagePrepare
	r.st.Plan = nil
	r.st.Handle = nil
	r.st.Cursor = tailer.Cursor{}
	r.st.Outcome = nil
}

func (r *taskRun) endAttempt(ended, lastError string) {
	name := ""
	if r.st.Plan != nil {
		name = r.st.Plan.Summary.Name
	}
	r.st.Attempts = append(r.st.Attempts, AttemptSummary{
		Attempt: r.st.Attempt, PlanName: name, Ended: ended, LastError: lastError})
}

func (r *taskRun) prepare() error {
	var info activities.PlanInfo
	err := workflow.ExecuteActivity(prepareOptions(r.ctx), acts.PreparePlan,
		activities.PrepareRequest{Dispatch: r.st.Dispatch, Attempt: r.st.Attempt}).Get(r.ctx, &info)
	if err != nil {
		return fmt.Errorf("prepare plan for attempt %d: %w", r.st.Attempt, err)
	}
	r.st.Plan = &info
	r.st.Brief = mapping.NewBriefState(r.st.Dispatch.TaskID, info.Summary)
	r.st.Cursor = tailer.Cursor{}
	r.st.LastEventAt = workflow.Now(r.ctx)
	r.sendPatches([]mapping.Patch{r.st.Brief.InitPatch()})
	if err := r.setStatus(sink.StatusUpdate{
		Status:        "dispatched",
		DispatchState: mapping.DispatchStateFor(mapping.PlanStatus("pending")),
	}); err != nil {
		return err
	}
	r.st.Stage = stageStart
	r.upsertSearch()
	return nil
}

func (r *taskRun) start() error {
	var h proc.Handle
	err := workflow.ExecuteActivity(startOptions(r.ctx), acts.StartConductor,
		activities.StartRequest{Plan: *r.st.Plan}).Get(r.ctx, &h)
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrConductorStart {
			o := mapping.CrashOutcome(r.currentPhase(), -1, "conductor could not start: "+appErr.Message())
			r.st.Outcome = &o
			r.st.Stage = stageFinish
			return nil
		}
		return fmt.Errorf("start conductor for %s: %w", r.st.Plan.Summary.Name, err)
	}
	r.st.Handle = &h
	r.st.LastEventAt = workflow.Now(r.ctx)
	r.st.Stage = stageRunning
	return nil
}

// tail waits for the next batch of events, or a signal, whichever is first.
func (r *taskRun) tail() error {
	wait := r.st.Tuning.tailWait()
	if limit := r.silenceLimit() / 2; limit > 0 && limit < wait {
		wait = limit
	}
	actCtx, cancel := workflow.WithCancel(tailOptions(r.ctx, wait))
	defer cancel()
	fut := workflow.ExecuteActivity(actCtx, acts.TailEvents, activities.TailRequest{
		Plan: *r.st.Plan, Handle: *r.st.Handle, Cursor: r.st.Cursor, MaxWait: wait})

	var res activities.TailResult
	var tailErr error
	got := false
	sel := workflow.NewSelector(r.ctx)
	sel.AddFuture(fut, func(f workflow.Future) {
		got = true
		tailErr = f.Get(r.ctx, &res)
	})
	sel.AddReceive(r.abortCh, func(c workflow.ReceiveChannel, _ bool) {
		var a AbortSignal
		c.Receive(r.ctx, &a)
		r.noteSignal(SignalAbort, a.Reason)
	})
	sel.AddReceive(r.redispatchCh, func(c workflow.ReceiveChannel, _ bool) {
		var d RedispatchSignal
		c.Receive(r.ctx, &d)
		r.noteSignal(SignalRedispatch, d.Reason)
	})
	sel.Select(r.ctx)
	if !got {
		// A signal came first. The poll is cancelled and its result, if any,
		// dropped: the cursor did not move, so the next poll reads it again.
		return nil
	}
	if tailErr != nil {
		return fmt.Errorf("tail events of %s: %w", r.st.Plan.Summary.Name, tailErr)
	}
	r.st.Polls++
	r.apply(res)
	if r.st.Outcome != nil {
		r.st.Stage = stageFinish
		return nil
	}
	if res.Exited {
		o := r.exitOutcome(res)
		r.st.Outcome = &o
		r.st.Stage = stageFinish
		return nil
	}
	if silent := workflow.Now(r.ctx).Sub(r.st.LastEventAt); silent > r.silenceLimit() {
		r.log.Warn("conductor silent past its timeout; stopping it",
			"plan", r.st.Plan.Summary.Name, "silent", silent.String())
		completed, err := r.stopConductor()
		if err != nil {
			return err
		}
		o := mapping.TimeoutOutcome(r.currentPhase())
		if completed != nil {
			o = *completed
		}
		r.st.Outcome = &o
		r.st.Stage = stageFinish
	}
	return nil
}

// silenceLimit is how long the conductor may write nothing: the plan's
// timeout plus a grace, since the conductor enforces phase timeouts itself
// and this only catches a conductor that hangs.
func (r *taskRun) silenceLimit() time.Duration {
	if r.st.Plan == nil || r.st.Plan.Summary.TimeoutSec <= 0 {
		return 0
	}
	return time.Duration(r.st.Plan.Summary.TimeoutSec)*time.Second + r.st.Tuning.silenceGrace()
}

// apply reduces a batch into the brief, sends the resulting patches in
// order, and notes a terminal event's outcome.
func (r *taskRun) apply(res activities.TailResult) {
	r.st.Cursor = res.Next
	r.st.Malformed += res.Malformed
	if res.MalformedSample != "" {
		r.st.LastMalformed = res.MalformedSample
	}
	if len(res.Events) == 0 {
		return
	}
	r.st.LastEventAt = workflow.Now(r.ctx)
	var patches []mapping.Patch
	started := false
	for _, ev := range res.Events {
		p, ok := r.st.Brief.Apply(ev)
		if ok {
			patches = append(patches, p)
		}
		r.st.EventsApplied++
		if ev.Type == mapping.EventPhaseStart {
			started = true
		}
		if ev.IsTerminal() && r.st.Outcome == nil {
			if o, ok := mapping.OutcomeFromEvent(ev, r.st.Brief); ok {
				r.st.Outcome = &o
			}
		}
	}
	r.sendPatches(patches)
	if started && r.st.TaskStatus != "in_progress" && r.st.Outcome == nil {
		if err := r.setStatus(sink.StatusUpdate{
			Status:        "in_progress",
			DispatchState: mapping.DispatchStateFor(mapping.PlanStatus("running")),
		}); err != nil {
			// The status write failed for good (karvi refused it); the run
			// goes on and the problem is visible in the status query.
			r.st.SinkProblem = err.Error()
		}
	}
	r.upsertSearch()
}

// exitOutcome reads the end of a run that wrote no terminal event: the
// conductor's state.json is the truth then (PEERS.md). edda leaves
// plan_status "running" even when a phase exhausted its retries, so the
// phases decide; a state that explains nothing means the conductor itself
// died, and its exit code and last output are what a person needs.
func (r *taskRun) exitOutcome(res activities.TailResult) mapping.Outcome {
	where := "before any phase started"
	if phase := r.currentPhase(); phase != "" {
		switch r.st.Brief.Brief.Phases[phase].Status {
		case mapping.PhaseFailed:
			where = "after phase " + phase + " failed"
		case mapping.PhasePassed, mapping.PhaseSkipped:
			where = "after phase " + phase + " ended"
		default:
			where = "while phase " + phase + " was running"
		}
	}
	how, code := exitHow(res.ExitCode)
	// Exit 0 is a conductor that believed it was done: not a crash.
	ended := mapping.CrashOutcome
	if res.ExitCode == 0 {
		ended = mapping.UnfinishedOutcome
	}
	if res.State != nil {
		o := mapping.OutcomeFromState(*res.State, r.st.Brief, r.st.Plan.Summary.BudgetUSD)
		if o.ErrorType != mapping.ErrConductorExit {
			return o
		}
		return ended("", code, fmt.Sprintf(
			"conductor %s %s, leaving the plan %s%s", how, where, res.State.PlanStatus, tailNote(res.LogTail)))
	}
	// Without state.json the event log still tells the story when the last
	// failure used up the phase's attempts: that is the seed's "failed after
	// N attempts", whatever happened to the file afterwards.
	if f := r.st.Brief.LastFailure; f != nil && res.ExitCode == 0 &&
		r.st.Brief.Brief.Phases[f.PhaseID].Status == mapping.PhaseFailed &&
		f.Attempt >= r.st.Plan.Summary.MaxAttempts && r.st.Plan.Summary.MaxAttempts > 0 {
		errType := f.ErrorType
		if errType == "" {
			errType = mapping.ErrCheckFailed
		}
		return mapping.PhaseFailedOutcome(mapping.PlanBlocked, f.PhaseID, f.Attempt, errType, f.Error)
	}
	return ended("", code, fmt.Sprintf(
		"conductor %s %s and left no readable state.json (%s)%s", how, where, res.StateError, tailNote(res.LogTail)))
}

// exitHow words the conductor's exit status for a person. A status of -1
// means the supervisor recorded none: it was killed together with the
// conductor (SIGKILL to the group, the OOM killer), and "exit code -1" would
// only puzzle. 128+n is the shell's report of death by signal n. It returns
// the exit code still worth printing (0 for none).
func exitHow(code int) (string, int) {
	switch {
	case code < 0:
		return "was killed (no exit status was recorded)", 0
	case code > 128 && code < 128+65:
		return fmt.Sprintf("was killed by signal %d", code-128), 0
	}
	return "exited", code
}

func tailNote(logTail string) string {
	if logTail == "" {
		return ""
	}
	return "; last output: " + logTail
}

// stopConductor aborts the current run and reads what it wrote up to its
// end. It returns the conductor's own outcome when the plan had already
// completed before it could be stopped.
func (r *taskRun) stopConductor() (*mapping.Outcome, error) {
	if r.st.Handle == nil || r.st.Plan == nil {
		return nil, nil
	}
	err := workflow.ExecuteActivity(abortOptions(r.ctx), acts.AbortConductor,
		activities.AbortRequest{Plan: *r.st.Plan, Handle: *r.st.Handle}).Get(r.ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("stop conductor of %s: %w", r.st.Plan.Summary.Name, err)
	}
	// The process group is gone: one more read drains the log to its end.
	var res activities.TailResult
	err = workflow.ExecuteActivity(tailOptions(r.ctx, 0), acts.TailEvents, activities.TailRequest{
		Plan: *r.st.Plan, Handle: *r.st.Handle, Cursor: r.st.Cursor}).Get(r.ctx, &res)
	if err != nil {
		return nil, fmt.Errorf("drain events of %s: %w", r.st.Plan.Summary.Name, err)
	}
	before := r.st.Outcome
	r.apply(res)
	completed := r.st.Outcome
	r.st.Outcome = before
	r.st.Handle = nil
	if completed != nil && completed.TaskStatus == "completed" {
		return completed, nil
	}
	return nil, nil
}

// finish writes the task's final status. A redispatch that arrived while the
// attempt was ending starts a new attempt; an abort has nothing left to stop.
func (r *taskRun) finish() error {
	o := *r.st.Outcome
	err := r.setStatus(sink.StatusUpdate{
		Status:        o.TaskStatus,
		Reason:        o.BlockerReason,
		DispatchState: o.DispatchState,
		LastError:     o.LastError,
	})
	ended := o.TaskStatus
	if o.LastError == mapping.AbortedOutcome().LastError {
		ended = "aborted"
	}
	r.endAttempt(ended, o.LastError)
	r.upsertSearch()
	if err != nil {
		r.st.Stage = stageDone
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("task %s ended %s but its status could not be written: %v",
				r.st.Dispatch.TaskID, o.TaskStatus, err), activities.ErrSinkRejected, err)
	}
	r.drainSignals()
	switch r.takePending() {
	case SignalRedispatch:
		r.newAttempt()
		return nil
	case SignalAbort:
		r.st.SignalsIgnored++
		r.log.Info("abort ignored: the task already ended", "status", o.TaskStatus)
	}
	r.st.Stage = stageDone
	return nil
}

func (r *taskRun) sendPatches(patches []mapping.Patch) {
	if len(patches) == 0 {
		return
	}
	err := workflow.ExecuteLocalActivity(patchOptions(r.ctx), acts.PatchBrief,
		activities.PatchRequest{TaskID: r.st.Dispatch.TaskID, Patches: patches}).Get(r.ctx, nil)
	if err != nil {
		// Only final refusals get here (404 no brief, unauthorized): the brief
		// stays in the workflow, queryable, and the run goes on.
		r.st.SinkProblem = err.Error()
		r.log.Warn("brief patch not delivered", "task", r.st.Dispatch.TaskID, "error", err)
		return
	}
	r.st.PatchesSent += len(patches)
}

func (r *taskRun) setStatus(u sink.StatusUpdate) error {
	u.PlanID = r.st.Dispatch.PlanID
	if r.st.Plan != nil {
		u.PlanName = r.st.Plan.Summary.Name
	}
	u.AskedAt = workflow.Now(r.ctx).UTC().Format(time.RFC3339)
	err := workflow.ExecuteActivity(statusOptions(r.ctx), acts.SetTaskStatus,
		activities.StatusRequest{TaskID: r.st.Dispatch.TaskID, Update: u}).Get(r.ctx, nil)
	if err != nil {
		r.st.SinkProblem = err.Error()
		return fmt.Errorf("set task %s status %s: %w", r.st.Dispatch.TaskID, u.Status, err)
	}
	r.st.TaskStatus = u.Status
	return nil
}

func (r *taskRun) currentPhase() string {
	return r.st.Brief.Brief.CurrentPhase
}

func (r *taskRun) upsertSearch() {
	plan := ""
	if r.st.Plan != nil {
		plan = r.st.Plan.Summary.Name
	}
	phase, status := r.currentPhase(), r.st.TaskStatus
	if plan == r.searchPlan && phase == r.searchPhase && status == r.searchStatus && r.searchPlan != "" {
		return
	}
	updates := []temporal.SearchAttributeUpdate{SearchTaskID.ValueSet(r.st.Dispatch.TaskID)}
	if plan != "" {
		updates = append(updates, SearchPlanName.ValueSet(plan))
	}
	if phase != "" {
		updates = append(updates, SearchCurrentPhase.ValueSet(phase))
	}
	if status != "" {
		updates = append(updates, SearchTaskStatus.ValueSet(status))
	}
	if err := workflow.UpsertTypedSearchAttributes(r.ctx, updates...); err != nil {
		r.log.Warn("search attributes not updated", "error", err)
		return
	}
	r.searchPlan, r.searchPhase, r.searchStatus = plan, phase, status
}

func (r *taskRun) status() Status {
	s := Status{
		TaskID:          r.st.Dispatch.TaskID,
		Stage:           r.st.Stage,
		Attempt:         r.st.Attempt,
		CurrentPhase:    r.currentPhase(),
		CompletedPhases: r.st.Brief.Brief.CompletedPhases,
		TaskStatus:      r.st.TaskStatus,
		Outcome:         r.st.Outcome,
		EventsApplied:   r.st.EventsApplied,
		PatchesSent:     r.st.PatchesSent,
		Malformed:       r.st.Malformed,
		LastMalformed:   r.st.LastMalformed,
		SignalsReceived: r.st.SignalsReceived,
		SignalsIgnored:  r.st.SignalsIgnored,
		SinkProblem:     r.st.SinkProblem,
		ContinuedAsNew:  r.st.ContinuedAsNew,
		Attempts:        r.st.Attempts,
	}
	if r.st.Plan != nil {
		s.PlanName = r.st.Plan.Summary.Name
		s.TotalPhases = len(r.st.Plan.Summary.PhaseIDs)
	}
	if r.st.Handle != nil {
		s.ConductorPID = r.st.Handle.PID
	}
	return s
}

func (r *taskRun) result() Result {
	res := Result{
		TaskID:   r.st.Dispatch.TaskID,
		Attempt:  r.st.Attempt,
		Brief:    r.st.Brief.Brief,
		Attempts: r.st.Attempts,
		Dispatch: r.st.Dispatch,
	}
	if r.st.Plan != nil {
		res.PlanName = r.st.Plan.Summary.Name
	}
	if r.st.Outcome != nil {
		res.Outcome = *r.st.Outcome
	}
	return res
}
