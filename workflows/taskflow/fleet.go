package taskflow

import (
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/fleet"
	"karvi-edda-temporal/mapping"
)

// An attempt in a fleet of worker hosts (docs/fleet.md). StartAttempt goes
// to the shared task queue, and the worker that takes it starts the
// conductor on its own machine and names its host in the result. Every
// later activity that reads the conductor's log or stops it then goes to
// that host's own queue, which only its workers poll, with a
// schedule-to-start limit: a host whose worker does not take the activity
// within the grace (Tuning.HostGrace) is taken for lost, and the workflow
// settles the brief, ends the attempt saying so, and starts a new attempt
// on the shared queue, where another host takes it.
//
// Status writes (SetTaskStatus) stay on the shared queue: they touch only
// the sink and the event stream, which every host reaches, and a task's
// last status must be written even when its host is gone.

// runStart runs the attempt's StartAttempt into res. With host routing it
// first claims a host with room (ClaimHost, on the shared queue), and the
// start and every retry of it go to that host alone: a retried start finds
// the conductor its earlier try left and carries on with it. A claimed
// host that does not take the start within the grace is given up before
// anything ran there (its fence stops what it may have started, should it
// come back), and another host is claimed.
//
// claimed is the claim startAttempt made already (nil for none): the first
// start goes to its host.
func (r *taskRun) runStart(ctx workflow.Context, req taskact.StartAttemptRequest, res *taskact.StartAttemptResult, claimed *taskact.ClaimHostResult) error {
	if !r.claimsHost {
		return workflow.ExecuteActivity(ctx, acts.StartAttempt, req).Get(r.ctx, res)
	}
	a := &r.st.Current
	for {
		if claimed == nil {
			claim, err := r.claimHost(false)
			if err != nil {
				return err
			}
			claimed = &claim
		}
		r.pinHost(claimed.Host)
		claimed = nil
		err := workflow.ExecuteActivity(r.onHost(ctx), acts.StartAttempt, req).Get(r.ctx, res)
		if err == nil || a.Host == "" || !isHostLost(err) {
			return err
		}
		r.log.Warn("the claimed host did not take the attempt's start; claiming another", "host", a.Host,
			"grace", r.st.Tuning.HostGraceOrDefault().String())
		a.Host = ""
	}
}

// claimHost claims a host with room for the attempt (ClaimHost, on the
// shared queue); join asks the claim to join the task to the worker's
// agent account too (pause_account.go).
func (r *taskRun) claimHost(join bool) (taskact.ClaimHostResult, error) {
	a := &r.st.Current
	var claim taskact.ClaimHostResult
	summary := fmt.Sprintf("claim a host for attempt %d of task %s", a.N, r.st.Dispatch.TaskID)
	err := workflow.ExecuteActivity(claimOptions(r.ctx, summary), acts.ClaimHost,
		taskact.ClaimHostRequest{TaskID: r.st.Dispatch.TaskID, Attempt: a.N, JoinAccount: join}).Get(r.ctx, &claim)
	if err != nil {
		return claim, fmt.Errorf("claim a host: %w", err)
	}
	return claim, nil
}

// pinHost records the host a started attempt runs on. A result without a
// host (a worker that names none), or a history recorded before routing
// existed, leaves every activity on the shared queue, as before.
func (r *taskRun) pinHost(host string) {
	if host == "" {
		return
	}
	if !r.hostRouting {
		return
	}
	r.st.Current.Host = host
}

// onHost sends the activities of ctx to the attempt's host, when it has
// one, and gives up on them when that host takes none within the grace.
// A schedule-to-start timeout is never retried, so the first one is the
// workflow's to handle (isHostLost).
func (r *taskRun) onHost(ctx workflow.Context) workflow.Context {
	host := r.st.Current.Host
	if host == "" {
		return ctx
	}
	ctx = workflow.WithTaskQueue(ctx, fleet.Queue(workflow.GetInfo(r.ctx).TaskQueueName, host))
	return workflow.WithScheduleToStartTimeout(ctx, r.st.Tuning.HostGraceOrDefault())
}

// isHostLost reports whether an activity failed because no worker of its
// host took it within the grace.
func isHostLost(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// errTypeHostLost is the error type of an attempt given up with its host.
const errTypeHostLost = "host_lost"

// hostLostOutcome is how an attempt given up with its host settles its
// brief: the phase under way failed, saying which host was lost.
func hostLostOutcome(host, phase string) mapping.Outcome {
	msg := fmt.Sprintf("host %s lost before the first phase", host)
	if phase != "" {
		msg = fmt.Sprintf("host %s lost during phase %s", host, phase)
	}
	return mapping.Outcome{
		PlanStatus:    mapping.PlanBlocked,
		TaskStatus:    mapping.TaskStatusFor(mapping.PlanBlocked),
		DispatchState: mapping.DispatchStateFor(mapping.PlanBlocked),
		LastError:     msg,
		BlockerReason: msg,
		Code:          1,
		ErrorType:     errTypeHostLost,
		PhaseID:       phase,
	}
}

// loseHost gives up the attempt whose host did not come back: the brief is
// settled with why (its phase under way failed), the attempt ends
// "host-lost", and a new attempt starts on the shared queue. Its conductor
// is left where it is: if the host returns, its worker stops it (the
// fence, internal/fleet). A redispatch that was pending is what the new
// attempt does already.
func (r *taskRun) loseHost() {
	a := &r.st.Current
	o := hostLostOutcome(a.Host, r.currentPhase())
	r.log.Warn("host lost; starting the task anew elsewhere", "host", a.Host, "plan", a.PlanName(),
		"grace", r.st.Tuning.HostGraceOrDefault().String())
	a.SinkAhead = true
	r.settleBrief(o)
	r.notifyHostLost(a.Host, o.LastError) // after the brief: it never waits on this
	r.stepAttemptEnded(taskapi.EndedHostLost, o.LastError)
	r.endAttempt(taskapi.EndedHostLost, o.LastError)
	r.nextAttempt()
	if r.st.Signals.PendingRedispatch {
		r.st.Signals.PendingRedispatch = false
		r.st.Signals.Ignored++
	}
	r.upsertSearch()
}

// leaveHost notes a conductor that could not be stopped or drained because
// its host is gone; the decision at hand (an abort, a timeout) ends the
// attempt all the same, and the fence stops the conductor if the host
// comes back.
func (r *taskRun) leaveHost() {
	a := &r.st.Current
	r.log.Warn("host lost while stopping its conductor; leaving it to the fence", "host", a.Host, "plan", a.PlanName())
	r.notifyHostLost(a.Host, fmt.Sprintf("host %s lost while its conductor was being stopped", a.Host))
	a.Conductor = nil
	a.SinkAhead = true
	a.ConductorLeft = true
}
