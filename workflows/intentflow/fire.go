package intentflow

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/intentact"
	"karvi-edda-temporal/api/intent"
	"karvi-edda-temporal/intent"
	"karvi-edda-temporal/workflows/flowkit"
)

// intentActs is only used for its method values, as acts is.
var intentActs *intentact.Activities

// scheduledStartTime is set by a schedule on every workflow it starts: the
// fire's time (a trigger's is the moment it was asked for).
var scheduledStartTime = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

// IntentFireWorkflow is one fire of a schedule intent, started by the
// intent's Temporal Schedule. It starts from the state the previous fire
// ended with (Temporal hands each scheduled workflow its predecessor's
// result), decides whether it runs (intent.Admit), starts the target as an
// ordinary task or run workflow and waits for its outcome, backing off and
// trying again after a failure, and ends with the intent's new state:
// converged or in error, it pauses the schedule with a note saying why.
// While it waits, the schedule holds later fires back (overlap BUFFER_ALL),
// so an intent has one target at a time.
func IntentFireWorkflow(ctx workflow.Context, in intentapi.FireInput) (intent.State, error) {
	f, err := newFire(ctx, in)
	if err != nil {
		return intent.State{}, err
	}
	return f.run()
}

type fire struct {
	ctx     workflow.Context
	log     log.Logger
	spec    intent.Spec
	times   intent.Times
	st      intent.State
	id      string
	queue   string
	nominal time.Time
}

func newFire(ctx workflow.Context, in intentapi.FireInput) (*fire, error) {
	times, err := in.Intent.Times()
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("intent %s: %v", in.Intent.Name, err), "BadIntent", err)
	}
	info := workflow.GetInfo(ctx)
	f := &fire{ctx: ctx, log: workflow.GetLogger(ctx), spec: in.Intent, times: times,
		id: info.WorkflowExecution.ID, queue: info.TaskQueueName, nominal: info.WorkflowStartTime}
	if at, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(scheduledStartTime); ok {
		f.nominal = at
	}
	if workflow.HasLastCompletionResult(ctx) {
		if err := workflow.GetLastCompletionResult(ctx, &f.st); err != nil {
			// Losing the counts is better than an intent that can never
			// fire again.
			f.log.Warn("the previous fire's state does not read; starting afresh", "error", err)
			f.st = intent.State{}
		}
	}
	err = workflow.SetQueryHandlerWithOptions(ctx, intentapi.QueryState, func() (intent.State, error) {
		return f.st, nil
	}, workflow.QueryHandlerOptions{Description: "The intent's state: runs, errors, the last outcome, the latest fires and what this fire is doing"})
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (f *fire) run() (intent.State, error) {
	now := workflow.Now(f.ctx)
	rec := intent.FireRecord{ID: f.id, Kind: intent.FireScheduled, Nominal: f.nominal, Started: now}
	f.st.Reopen()
	if f.st.Done(f.spec) {
		rec.Result, rec.Outcome = intent.ResultHeld, f.st.Reason
		if err := f.pause(intent.ConvergedNote(f.st.Reason)); err != nil {
			return f.st, err
		}
		return f.end(rec), nil
	}
	// The decision reads the spec's times in its zone: it is recorded, so
	// that a replay on a worker with other zone data decides the same.
	var adm intent.Admission
	decided := workflow.SideEffect(f.ctx, func(workflow.Context) any {
		return intent.Admit(f.st, f.spec, f.times, f.nominal, now)
	})
	if err := decided.Get(&adm); err != nil {
		return f.st, err
	}
	rec.Kind = adm.Kind
	if f.spec.Overflow == intent.OverflowDefer {
		sched, err := f.inspect()
		if err != nil {
			return f.st, err
		}
		f.st.Missed(f.spec, sched.MissedCatchUpWindow)
	}
	if !adm.Run {
		rec.Result = adm.Result
		if adm.Result == intent.ResultOverflow && f.spec.Overflow == intent.OverflowDefer {
			f.st.Deferred++
			rec.Outcome = "deferred"
		}
		return f.end(rec), nil
	}
	if adm.Fresh {
		f.st.BusySince = now
	}
	stop, err := f.runTarget(&rec)
	if err != nil {
		return f.st, err
	}
	f.st.Record(f.ended(rec))
	// The last fire of a backlog runs the fire that stands for those over
	// the catch-up bound, one minimum interval later.
	if !stop && f.st.Deferred > 0 && adm.Newer == 0 {
		if err := f.runDeferred(); err != nil {
			return f.st, err
		}
	}
	f.st.BusyUntil = workflow.Now(f.ctx)
	f.doing("")
	return f.st, nil
}

func (f *fire) runDeferred() error {
	wait := f.spec.MinInterval.D()
	f.doing(fmt.Sprintf("deferred fire for %d missed fires over the catch-up bound, at %s", f.st.Deferred, fireClock(workflow.Now(f.ctx).Add(wait))))
	if err := workflow.Sleep(f.ctx, wait); err != nil {
		return err
	}
	folded := f.st.Deferred
	f.st.Deferred = 0
	rec := intent.FireRecord{ID: f.id, Kind: intent.FireDeferred, Nominal: f.nominal, Started: workflow.Now(f.ctx),
		Outcome: fmt.Sprintf("for %d missed fires", folded)}
	if _, err := f.runTarget(&rec); err != nil {
		return err
	}
	f.st.Record(f.ended(rec))
	return nil
}

// runTarget runs the target until it reaches an outcome, backing off after
// each failure, and reports whether the intent stopped (converged, circuit
// open, or paused or cancelled while it backed off).
func (f *fire) runTarget(rec *intent.FireRecord) (stop bool, err error) {
	for {
		rec.Tries++
		o, problem, err := f.once()
		if err != nil {
			return false, err
		}
		if problem == "" {
			rec.Result, rec.Error, rec.Target = intent.ResultRan, "", o.WorkflowID
			if rec.Outcome != "" {
				rec.Outcome += "; " // after what a deferred run stands for
			}
			rec.Outcome += o.String()
			if f.st.Ran(f.spec, o) {
				return true, f.pause(intent.ConvergedNote(f.st.Reason))
			}
			return false, nil
		}
		rec.Result, rec.Error = intent.ResultError, problem
		open, wait := f.st.Failed(f.spec, problem)
		if open {
			return true, f.pause(intent.ErrorNote(f.st.Reason))
		}
		f.doing(fmt.Sprintf("backing off until %s after failure %d of %d: %s",
			fireClock(workflow.Now(f.ctx).Add(wait)), f.st.ConsecutiveErrors, f.spec.MaxErrors, problem))
		if err := workflow.Sleep(f.ctx, wait); err != nil {
			return false, err
		}
		sched, err := f.inspect()
		if err != nil {
			return false, err
		}
		if !sched.Exists || sched.Paused {
			rec.Result = intent.ResultHeld
			rec.Error = problem + " (not tried again: the intent was paused or cancelled meanwhile)"
			return true, nil
		}
	}
}

// once starts the target and waits for its outcome. A problem is a failed
// fire (counted, backed off); an error ends the workflow (it was
// cancelled or terminated).
func (f *fire) once() (o intent.Outcome, problem string, err error) {
	t := f.spec.Target
	var started intentact.StartTargetResult
	err = workflow.ExecuteActivity(startTargetOptions(f.ctx, "Start "+t.String()), intentActs.StartTarget,
		intentact.StartTargetRequest{Intent: f.spec.Name, FireID: f.id, Target: t, TaskQueue: f.queue,
			NextAttempt: f.st.LastAttempt + 1}).Get(f.ctx, &started)
	if err != nil {
		if temporal.IsCanceledError(err) {
			return o, "", err
		}
		return o, "cannot start " + t.String() + ": " + messageOf(err), nil
	}
	if started.Attempt > 0 {
		f.st.LastAttempt = started.Attempt
	}
	what := started.WorkflowID
	if started.Attempt > 0 {
		what += fmt.Sprintf(", attempt %d", started.Attempt)
	}
	if started.Adopted {
		what += ", left running by an earlier fire"
	}
	f.doing(fmt.Sprintf("waiting for %s (%s)", t, what))
	var res intentact.AwaitTargetResult
	err = workflow.ExecuteActivity(flowkit.AwaitOptions(f.ctx, "Wait for "+t.String()+" ("+what+")"), intentActs.AwaitTarget,
		intentact.AwaitTargetRequest{Target: t, WorkflowID: started.WorkflowID, RunID: started.RunID}).Get(f.ctx, &res)
	switch {
	case err != nil && temporal.IsCanceledError(err):
		return o, "", err
	case err != nil:
		return o, messageOf(err), nil
	case res.Outcome == nil:
		return o, res.Failure, nil
	}
	o = *res.Outcome
	o.EndedAt = workflow.Now(f.ctx)
	return o, "", nil
}

func (f *fire) inspect() (intentact.IntentSchedule, error) {
	var s intentact.IntentSchedule
	err := workflow.ExecuteActivity(scheduleOptions(f.ctx, "Read schedule "+intentapi.ScheduleID(f.spec.Name)),
		intentActs.InspectIntent, intentapi.ScheduleID(f.spec.Name)).Get(f.ctx, &s)
	return s, err
}

func (f *fire) pause(note string) error {
	return workflow.ExecuteActivity(scheduleOptions(f.ctx, "Pause schedule: "+clipNote(note, 100)), intentActs.PauseIntent,
		intentact.PauseRequest{ScheduleID: intentapi.ScheduleID(f.spec.Name), Note: note}).Get(f.ctx, nil)
}

func (f *fire) ended(rec intent.FireRecord) intent.FireRecord {
	rec.Ended = workflow.Now(f.ctx)
	return rec
}

// end records a fire that did not run its target.
func (f *fire) end(rec intent.FireRecord) intent.State {
	f.st.Record(f.ended(rec))
	f.doing("")
	return f.st
}

// doing says what the fire does now, in the state query and in the Web
// UI's current details.
func (f *fire) doing(what string) {
	f.st.Doing = what
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**Intent %s** · %s · %s\n\n", f.spec.Name, f.spec.Target, f.spec.When()))
	b.WriteString(fmt.Sprintf("runs %d of at most %d · errors %d (%d in a row, circuit at %d) · skipped %d",
		f.st.Runs, f.spec.MaxRuns, f.st.Errors, f.st.ConsecutiveErrors, f.spec.MaxErrors, f.st.Skipped))
	if o := f.st.LastOutcome; o != nil {
		b.WriteString("\n\nlast outcome: " + o.String())
	}
	if what != "" {
		b.WriteString("\n\nnow: " + what)
	}
	workflow.SetCurrentDetails(f.ctx, b.String())
}

// messageOf is the innermost application error's message: "task T5
// already has a running workflow ..." rather than the activity error
// wrapped around it.
func messageOf(err error) string {
	msg := err.Error()
	var app *temporal.ApplicationError
	for e := err; e != nil && errors.As(e, &app); e = app.Unwrap() {
		msg = app.Message()
	}
	return msg
}

func fireClock(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" }

// clipNote shortens s to n runes for a one-line summary.
func clipNote(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
