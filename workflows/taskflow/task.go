package taskflow

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/metrics"
	"karvi-edda-temporal/mapping"
)

// acts is only used for its method values: the compiler checks the activity
// names, and the worker resolves them to the registered implementations.
var acts *taskact.Activities

// TaskWorkflow drives one karvi task through edda: it generates the plan,
// starts the conductor, turns every conductor event into a brief patch, and
// ends by setting the task's status. It owns the brief and the tail cursor, so
// a worker crash at any point neither loses nor repeats a brief update.
func TaskWorkflow(ctx workflow.Context, in taskapi.TaskInput) (taskapi.Result, error) {
	r, err := newTaskRun(ctx, in)
	if err != nil {
		return taskapi.Result{}, err
	}
	if err := r.setup(); err != nil {
		return taskapi.Result{}, err
	}
	return r.run()
}

type taskRun struct {
	ctx          workflow.Context
	log          log.Logger
	st           State
	abortCh      workflow.ReceiveChannel
	redispatchCh workflow.ReceiveChannel
	// noteCh brings the run's notes; notesInline: they are read there
	// where they are used (budget.go), not by a coroutine.
	noteCh      workflow.ReceiveChannel
	notesInline bool
	// enc writes brief patches; its cache is not state.
	enc mapping.BriefEncoder
	// hostRouting: an attempt's conductor activities go to its host's queue.
	hostRouting bool
	// deliverInTail: the tail activity delivers the brief's patches itself
	// and reports back at checkpoints. Histories recorded before it replay
	// on the earlier path (one activity per batch of events, then a local
	// activity for its patches).
	deliverInTail bool
	// slotsOn: each attempt waits for an agent slot (slots.go).
	slotsOn bool
	// claimsHost: an attempt claims its host before it starts there.
	claimsHost bool
	// limitsOn: deliveries follow the transcripts, and a usage limit
	// pauses the task (pause.go).
	limitsOn bool
	// accountOn: the task shares its agent account's pauses, and gives its
	// slot back while paused (pause_account.go).
	accountOn bool
	accountCh workflow.ReceiveChannel
	// searchPhase and searchPlan remember what was last upserted, so search
	// attributes are only written when they change.
	searchPhase, searchPlan string
	searchStatus            mapping.TaskStatus
}

func newTaskRun(ctx workflow.Context, in taskapi.TaskInput) (*taskRun, error) {
	r := &taskRun{ctx: ctx, log: workflow.GetLogger(ctx)}
	switch {
	case len(in.Resume) > 0:
		if err := json.Unmarshal(in.Resume, &r.st); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("state handed over by continue-as-new: %v", err), "BadState", err)
		}
		r.st.ContinuedAsNew++
		r.adoptChain()
		return r, nil
	case len(in.Carry) > 0:
		var v1 stateV1
		if err := json.Unmarshal(in.Carry, &v1); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("state handed over by continue-as-new: %v", err), "BadState", err)
		}
		r.st = v1.upgrade()
		r.st.ContinuedAsNew++
		r.adoptChain()
		return r, nil
	}
	// A bad dispatch fails here, before anything is written or started.
	if err := in.Dispatch.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("invalid dispatch plan: %v", err), activities.ErrInvalidDispatch, err)
	}
	if err := validSlotRequest(in.Slots); err != nil {
		return nil, err
	}
	if in.Account != "" {
		if err := accountapi.ValidName(in.Account); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("invalid account: %v", err), activities.ErrInvalidDispatch, err)
		}
	}
	attempt := in.Attempt
	if attempt < 1 {
		attempt = 1
	}
	if in.Budget != nil {
		if err := in.Budget.Validate(); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("invalid task budget: %v", err), activities.ErrInvalidDispatch, err)
		}
	}
	r.st = State{
		Dispatch: in.Dispatch,
		Tuning:   in.Tuning,
		Slots:    in.Slots,
		Account:  in.Account,
		Current:  newAttempt(attempt, workflow.Now(ctx)),
		Budget:   BudgetState{Budget: in.Budget, ReportSpend: in.ReportSpend},
	}
	if attempt > 1 {
		r.st.Dispatch.Mode = "redispatch"
	}
	r.adoptChain()
	r.st.Current.Nonce = r.st.Chain
	r.beginStream()
	metrics.AttemptStarted(workflow.GetMetricsHandler(ctx))
	return r, nil
}

func (r *taskRun) setup() error {
	r.abortCh = workflow.GetSignalChannel(r.ctx, taskapi.SignalAbort)
	r.redispatchCh = workflow.GetSignalChannel(r.ctx, taskapi.SignalRedispatch)
	if err := workflow.SetQueryHandlerWithOptions(r.ctx, taskapi.QueryCost, func() (taskapi.Cost, error) {
		return r.cost(), nil
	}, workflow.QueryHandlerOptions{Description: "what the attempts spent, by phase, model and skill, against the budget"}); err != nil {
		return fmt.Errorf("register cost query: %w", err)
	}
	if err := workflow.SetQueryHandler(r.ctx, taskapi.QueryBrief, func() (mapping.Brief, error) {
		return r.st.Current.Brief.Brief, nil
	}); err != nil {
		return fmt.Errorf("register brief query: %w", err)
	}
	if err := workflow.SetQueryHandler(r.ctx, taskapi.QueryStatus, func() (taskapi.Status, error) {
		return r.status(), nil
	}); err != nil {
		return fmt.Errorf("register status query: %w", err)
	}
	if err := r.setupJobQuery(); err != nil {
		return err
	}
	r.upsertSearch()
	r.showDetails()
	return nil
}

func (r *taskRun) run() (taskapi.Result, error) {
	// One marker versions both changes a task's history records at its
	// start: version 1 delivers in the tail, version 2 also routes an
	// attempt's conductor activities to its host (fleet.go), version 3
	// follows usage limits (pause.go), version 4 claims the host before
	// the start (fleet.go). Each marker costs two history events, so a
	// later change of the same moment raises this one's version instead of
	// adding its own.
	v := workflow.GetVersion(r.ctx, versionDeliverInTail, workflow.DefaultVersion, versionClaimHost)
	r.deliverInTail = v >= 1
	r.hostRouting = v >= versionHostRouting
	r.limitsOn = v >= versionUsageLimits
	r.claimsHost = v >= versionClaimHost
	if !r.deliverInTail {
		r.st.Stream = nil // the earlier path writes no stream
	}
	r.slotsOn = r.useSlots()
	r.accountOn = r.useAccount()
	r.listenForNotes()
	for {
		r.drainSignals()
		if err := r.actOnSignals(); err != nil {
			return taskapi.Result{}, err
		}
		var err error
		switch r.st.Current.Stage {
		case taskapi.StagePrepare:
			if r.budgetSpentAtStart() {
				break
			}
			if r.deliverInTail {
				err = r.startAttempt()
			} else {
				err = r.prepare()
			}
		case taskapi.StageStart:
			err = r.start()
		case taskapi.StageRunning:
			if r.deliverInTail {
				err = r.deliver()
			} else {
				err = r.tail()
			}
		case taskapi.StagePaused:
			err = r.paused()
		case taskapi.StageFinish:
			err = r.finish()
		case taskapi.StageDone:
			r.flushSteps()
			return r.result(), nil
		default:
			return taskapi.Result{}, temporal.NewNonRetryableApplicationError(
				"unknown attempt stage "+string(r.st.Current.Stage), "BadState", nil)
		}
		if err != nil {
			return taskapi.Result{}, err
		}
		r.showDetails()
		if r.st.Current.Stage == taskapi.StageRunning && r.shouldContinueAsNew() {
			r.drainSignals()
			// An account's notice is acted on first: a signal does not
			// cross continue-as-new.
			noticed := r.accountOn && r.accountCh.Len() > 0
			if !r.st.Signals.PendingAbort && !r.st.Signals.PendingRedispatch && !noticed {
				r.takeNotes() // the next run applies them
				resume := r.st
				resume.Polls = 0
				data, err := json.Marshal(resume)
				if err != nil {
					return taskapi.Result{}, fmt.Errorf("hand over the state: %w", err)
				}
				return taskapi.Result{}, workflow.NewContinueAsNewError(r.ctx, taskapi.TaskWorkflowName,
					taskapi.TaskInput{Dispatch: r.st.Dispatch, Tuning: r.st.Tuning, Resume: data})
			}
		}
	}
}

func (r *taskRun) shouldContinueAsNew() bool {
	info := workflow.GetInfo(r.ctx)
	if info.GetContinueAsNewSuggested() {
		return true
	}
	limit := r.st.Tuning.ContinueAsNewAfterPollsOrZero()
	return limit > 0 && r.st.Polls >= limit
}

// drainSignals takes every signal already delivered without blocking.
func (r *taskRun) drainSignals() {
	for {
		var a taskapi.AbortSignal
		if r.abortCh.ReceiveAsync(&a) {
			r.noteSignal(taskapi.SignalAbort, a.Reason)
			continue
		}
		var d taskapi.RedispatchSignal
		if r.redispatchCh.ReceiveAsync(&d) {
			r.noteSignal(taskapi.SignalRedispatch, d.Reason)
			continue
		}
		return
	}
}

func (r *taskRun) noteSignal(name, reason string) {
	sig := &r.st.Signals
	sig.Received++
	if sig.PendingAbort || sig.PendingRedispatch {
		// Folded into the decision already pending for this burst.
		sig.Ignored++
	}
	if name == taskapi.SignalAbort {
		sig.PendingAbort = true
	} else {
		sig.PendingRedispatch = true
	}
	r.step(canonical.Step{Kind: canonical.StepSignal, Signal: name, Reason: reason})
	r.log.Info("signal received", "signal", name, "reason", reason, "stage", r.st.Current.Stage)
}

// takePending returns the action a burst of signals decided (abort beats
// redispatch) and clears it.
func (r *taskRun) takePending() string {
	sig := &r.st.Signals
	action := ""
	switch {
	case sig.PendingAbort:
		action = taskapi.SignalAbort
	case sig.PendingRedispatch:
		action = taskapi.SignalRedispatch
	}
	sig.PendingAbort, sig.PendingRedispatch = false, false
	return action
}

// actOnSignals applies the pending action to the current stage. In the
// finish stage the outcome is final: finish() decides there.
func (r *taskRun) actOnSignals() error {
	if stage := r.st.Current.Stage; stage == taskapi.StageFinish || stage == taskapi.StageDone {
		return nil
	}
	action := r.takePending()
	if action == "" {
		return nil
	}
	if r.st.Current.Stage == taskapi.StageRunning {
		completed, err := r.stopConductor()
		if err != nil {
			return err
		}
		if completed != nil && action == taskapi.SignalAbort {
			// The conductor finished before the abort could reach it: the
			// truth is the conductor's, and the abort had nothing to stop.
			r.st.Signals.Ignored++
			r.decide(*completed)
			return nil
		}
	}
	if action == taskapi.SignalAbort {
		r.decide(mapping.AbortedOutcome())
		return nil
	}
	r.stepAttemptEnded(taskapi.EndedRedispatched, "")
	r.endAttempt(taskapi.EndedRedispatched, "")
	r.nextAttempt()
	return nil
}

// decide records the attempt's outcome; finish() reports it.
func (r *taskRun) decide(o mapping.Outcome) {
	r.st.Current.Outcome = &o
	r.st.Current.Stage = taskapi.StageFinish
	r.showDetails()
}

// nextAttempt moves to the next attempt: a new plan name (so a new
// conductor state directory) and REDISPATCH=1 on every phase. The brief
// stays until the new plan's skeleton replaces it, so queries keep showing
// the last one meanwhile.
func (r *taskRun) nextAttempt() {
	prev := r.st.Current
	r.st.Dispatch.Mode = "redispatch"
	r.st.Current = newAttempt(prev.N+1, workflow.Now(r.ctx))
	r.st.Current.Nonce = r.st.Chain
	metrics.AttemptStarted(workflow.GetMetricsHandler(r.ctx))
	r.st.Current.Brief = prev.Brief
}

func (r *taskRun) endAttempt(ended, lastError string) {
	metrics.AttemptEnded(workflow.GetMetricsHandler(r.ctx), ended)
	r.st.addFinished(r.st.Current.summary(ended, lastError, workflow.Now(r.ctx)))
	r.releaseSlot(ended)
	r.leaveAccount()
}

// addSignalReceivers makes sel note an abort or redispatch signal.
func (r *taskRun) addSignalReceivers(sel workflow.Selector) {
	sel.AddReceive(r.abortCh, func(c workflow.ReceiveChannel, _ bool) {
		var s taskapi.AbortSignal
		c.Receive(r.ctx, &s)
		r.noteSignal(taskapi.SignalAbort, s.Reason)
	})
	sel.AddReceive(r.redispatchCh, func(c workflow.ReceiveChannel, _ bool) {
		var s taskapi.RedispatchSignal
		c.Receive(r.ctx, &s)
		r.noteSignal(taskapi.SignalRedispatch, s.Reason)
	})
}

// pollWait is how long one read of the event log may wait for news: the
// tuning's bound, or half the silence limit when that is shorter, so a
// silent conductor is noticed in time.
func (r *taskRun) pollWait() time.Duration {
	wait := r.st.Tuning.TailWaitOrDefault()
	if limit := r.silenceLimit() / 2; limit > 0 && limit < wait {
		wait = limit
	}
	return wait
}

// stopIfSilent stops a conductor that wrote nothing for longer than its
// plan allows, and decides the attempt timed out (unless the plan completed
// before it could be stopped).
func (r *taskRun) stopIfSilent() error {
	a := &r.st.Current
	silent := workflow.Now(r.ctx).Sub(a.LastEventAt)
	if silent <= r.silenceLimit() {
		return nil
	}
	r.log.Warn("conductor silent past its timeout; stopping it",
		"plan", a.PlanName(), "silent", silent.String())
	completed, err := r.stopConductor()
	if err != nil {
		return err
	}
	o := mapping.TimeoutOutcome(r.currentPhase())
	if completed != nil {
		o = *completed
	}
	r.decide(o)
	return nil
}

// silenceLimit is how long the conductor may write nothing: the plan's
// timeout plus a grace, since the conductor enforces phase timeouts itself
// and this only catches a conductor that hangs.
func (r *taskRun) silenceLimit() time.Duration {
	p := r.st.Current.Plan
	if p == nil || p.Summary.TimeoutSec <= 0 {
		return 0
	}
	return time.Duration(p.Summary.TimeoutSec)*time.Second + r.st.Tuning.SilenceGraceOrDefault()
}

// stopConductor stops the attempt's conductor and delivers what it wrote up
// to its end. It returns the conductor's own outcome when the plan had
// already completed before it could be stopped.
func (r *taskRun) stopConductor() (*mapping.Outcome, error) {
	if r.deliverInTail {
		return r.stopAndDrain()
	}
	return r.stopConductorV1()
}

// finish writes the task's final status. A redispatch that arrived while the
// attempt was ending starts a new attempt; an abort has nothing left to stop.
func (r *taskRun) finish() error {
	a := &r.st.Current
	o := *a.Outcome
	if r.notesInline && len(a.Brief.PhaseOrder) > 0 {
		r.applyNotes() // notes that came after the attempt's last checkpoint
	}
	r.settleBrief(o)
	ended := string(o.TaskStatus)
	if mapping.IsAbort(o.LastError) {
		ended = taskapi.EndedAborted
	}
	// Both steps go with the status write, the workflow's last activity.
	r.stepStatus(o.TaskStatus, o.BlockerReason)
	r.stepAttemptEnded(ended, o.LastError)
	told := r.tellRunEnded(o, ended)
	err := r.setStatusLeaving(taskact.TaskStatusUpdate{
		Status:        o.TaskStatus,
		Reason:        o.BlockerReason,
		DispatchState: o.DispatchState,
		LastError:     o.LastError,
	}, r.leaveWithStatus())
	if told != nil {
		if serr := told.Get(r.ctx, nil); serr != nil {
			r.log.Warn("end not told to the run; it learns of it when the task workflow closes", "error", serr)
		}
	}
	r.endAttempt(ended, o.LastError)
	r.upsertSearch()
	if err != nil {
		a.Stage = taskapi.StageDone
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("task %s ended %s but its status could not be written: %v",
				r.st.Dispatch.TaskID, o.TaskStatus, err), taskact.ErrSinkRejected, err)
	}
	r.drainSignals()
	switch r.takePending() {
	case taskapi.SignalRedispatch:
		r.nextAttempt()
		return nil
	case taskapi.SignalAbort:
		r.st.Signals.Ignored++
		r.log.Info("abort ignored: the task already ended", "status", o.TaskStatus)
	}
	r.notifyBlocked(o)
	a.Stage = taskapi.StageDone
	return nil
}

// settleBrief sends the one last patch that makes the brief agree with how
// the attempt ended (mapping.BriefState.Settle), before the final status:
// a phase the conductor never reported an end for would otherwise read
// "running" for ever on a task karvi shows blocked. Nothing is sent, and
// nothing recorded in history, when the brief already agrees.
func (r *taskRun) settleBrief(o mapping.Outcome) {
	a := &r.st.Current
	if len(a.Brief.PhaseOrder) == 0 {
		return // no brief was ever sent for this task
	}
	r.catchUp()
	// An attempt ended before its plan was written still shows the brief
	// of the attempt before, which the sink holds: that is what settles.
	settled := a.Brief.Clone()
	c, changed := settled.Settle(o, a.FinalState, workflow.Now(r.ctx).UTC().Format(time.RFC3339))
	if !changed {
		return
	}
	// Histories recorded before this patch existed have no marker here.
	if workflow.GetVersion(r.ctx, versionSettle, workflow.DefaultVersion, 1) < 1 {
		return
	}
	a.Brief = settled
	r.showDetails()
	r.sendPatches([]mapping.Patch{r.enc.Patch(&a.Brief, c)})
}

// sendPatches sends patches the workflow made itself, in order, in a local
// activity: the skeleton and per-batch patches of the earlier path, and the
// settling patch at the end of an attempt.
func (r *taskRun) sendPatches(patches []mapping.Patch) {
	if len(patches) == 0 {
		return
	}
	summary := patchSummary(patches, len(r.st.Current.Brief.Brief.Log))
	err := workflow.ExecuteLocalActivity(patchOptions(r.ctx, summary), acts.PatchBrief,
		taskact.PatchRequest{TaskID: r.st.Dispatch.TaskID, Patches: patches}).Get(r.ctx, nil)
	if err != nil {
		// Only final refusals get here (404 no brief, unauthorized): the brief
		// stays in the workflow, queryable, and the run goes on.
		r.st.SinkProblem = err.Error()
		r.log.Warn("brief patch not delivered", "task", r.st.Dispatch.TaskID, "error", err)
		return
	}
	r.st.Counts.PatchesSent += len(patches)
}

func (r *taskRun) setStatus(u taskact.TaskStatusUpdate) error {
	return r.setStatusLeaving(u, "")
}

// setStatusLeaving is setStatus that also leaves the agent account leave
// (none when empty).
func (r *taskRun) setStatusLeaving(u taskact.TaskStatusUpdate, leave string) error {
	u.PlanID = r.st.Dispatch.PlanID
	u.PlanName = r.st.Current.PlanName()
	u.AskedAt = workflow.Now(r.ctx).UTC().Format(time.RFC3339)
	stream := r.streamFor()
	err := workflow.ExecuteActivity(statusOptions(r.ctx, statusSummary(u)), acts.SetTaskStatus,
		taskact.StatusRequest{TaskID: r.st.Dispatch.TaskID, Update: u, Stream: stream, LeaveAccount: leave}).Get(r.ctx, nil)
	if err != nil {
		r.st.SinkProblem = err.Error()
		return fmt.Errorf("set task %s status %s: %w", r.st.Dispatch.TaskID, u.Status, err)
	}
	r.streamStored(stream)
	r.st.TaskStatus = u.Status
	r.showDetails()
	return nil
}

func (r *taskRun) currentPhase() string {
	return r.st.Current.Brief.Brief.CurrentPhase
}

func (r *taskRun) upsertSearch() {
	plan := r.st.Current.PlanName()
	phase, status := r.currentPhase(), r.st.TaskStatus
	if plan == r.searchPlan && phase == r.searchPhase && status == r.searchStatus && r.searchPlan != "" {
		return
	}
	updates := []temporal.SearchAttributeUpdate{taskapi.SearchTaskID.ValueSet(r.st.Dispatch.TaskID)}
	if plan != "" {
		updates = append(updates, taskapi.SearchPlanName.ValueSet(plan))
	}
	if phase != "" {
		updates = append(updates, taskapi.SearchCurrentPhase.ValueSet(phase))
	}
	if status != "" {
		updates = append(updates, taskapi.SearchTaskStatus.ValueSet(string(status)))
	}
	if err := workflow.UpsertTypedSearchAttributes(r.ctx, updates...); err != nil {
		r.log.Warn("search attributes not updated", "error", err)
		return
	}
	r.searchPlan, r.searchPhase, r.searchStatus = plan, phase, status
}

func (r *taskRun) status() taskapi.Status {
	a := r.st.Current
	s := taskapi.Status{
		TaskID:          r.st.Dispatch.TaskID,
		Stage:           a.Stage,
		Attempt:         a.N,
		PlanName:        r.currentPlanName(),
		Host:            a.Host,
		CurrentPhase:    r.currentPhase(),
		PhaseStatus:     a.Brief.Brief.Phases[r.currentPhase()].Status,
		CompletedPhases: a.Brief.Brief.CompletedPhases,
		CostUSD:         spent(a.Brief),
		StartedAt:       a.StartedAt,
		TaskStatus:      r.st.TaskStatus,
		Outcome:         a.Outcome,
		EventsApplied:   r.st.Counts.EventsApplied,
		PatchesSent:     r.st.Counts.PatchesSent,
		Malformed:       r.st.Counts.Malformed,
		LastMalformed:   r.st.Counts.LastMalformed,
		SignalsReceived: r.st.Signals.Received,
		SignalsIgnored:  r.st.Signals.Ignored,
		SinkProblem:     r.st.SinkProblem,
		ContinuedAsNew:  r.st.ContinuedAsNew,
		Attempts:        r.st.Finished,
		StreamEvents:    r.st.Counts.StreamEvents,
		StreamWarnings:  r.st.Counts.StreamWarnings,
		StreamDropped:   r.st.Counts.StreamDropped,
		Slot:            r.slotStatus(),
		Pause:           r.st.Pause,
		Pauses:          r.st.Pauses,
		Stall:           a.Stall,
		Stalls:          r.st.Stalls,
	}
	if r.st.Stream != nil {
		s.Stream = r.st.Stream.RunID
	}
	if a.Plan != nil {
		s.TotalPhases = len(a.Plan.Summary.PhaseIDs)
	}
	if a.Conductor != nil {
		s.ConductorPID = a.Conductor.PID
	}
	return s
}

func (r *taskRun) result() taskapi.Result {
	a := r.st.Current
	res := taskapi.Result{
		TaskID:   r.st.Dispatch.TaskID,
		Attempt:  a.N,
		PlanName: a.PlanName(),
		Brief:    a.Brief.Brief,
		Attempts: r.st.Finished,
		Dispatch: r.st.Dispatch,
	}
	if a.Outcome != nil {
		res.Outcome = *a.Outcome
	}
	return res
}
