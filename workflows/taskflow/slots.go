package taskflow

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/slots"
	"karvi-edda-temporal/workflows/flowkit"
)

// A task that names an agent slot pool (TaskInput.Slots) waits for a slot
// before each attempt's conductor starts and gives it back when the
// attempt ends, however it ends. The pool is its own workflow
// (SlotPoolWorkflow); the task asks by activity (a workflow cannot send an
// update), is answered at once, and when it has to wait in line hears of
// its turn by signal, listening for abort and redispatch meanwhile.

// slotGrace is how long past its timeout a waiter waits for the pool's
// refusal before it withdraws by itself (the pool is slow or gone): a
// pool's check interval by default, so both follow the task's time scale.
const slotGrace = 30 * time.Second

// SlotHold is where an attempt stands with its agent slot.
type SlotHold struct {
	Pool string `json:"pool"`
	// Since is when the attempt asked.
	Since time.Time `json:"since"`
	// Position is its place in line when it queued.
	Position int  `json:"position,omitempty"`
	Held     bool `json:"held,omitempty"`
	// Refused is the pool's reason when it gave no slot: nothing to give
	// back then.
	Refused slots.Reason `json:"refused,omitempty"`
	// Released: the attempt gave its slot (or its place in line) back.
	Released bool `json:"released,omitempty"`
}

// useSlots says whether this run of the workflow waits for slots: the
// task named a pool, and the workflow's history was not recorded before
// slots existed.
func (r *taskRun) useSlots() bool {
	return r.st.Slots != nil && workflow.GetVersion(r.ctx, versionAgentSlots, workflow.DefaultVersion, 1) == 1
}

// needsSlot: the attempt may not start its conductor yet.
func (r *taskRun) needsSlot() bool {
	s := r.st.Current.Slot
	return r.slotsOn && (s == nil || !s.Held)
}

func (r *taskRun) slotKey() slots.Key {
	k := slots.Key{Task: r.st.Dispatch.TaskID, Attempt: r.st.Current.N, Chain: r.st.Current.Nonce}
	if n := r.st.Current.SlotRound; n > 0 {
		// The slot taken again after a pause is a key of its own: the
		// pool answers a released key "released".
		k.Chain = fmt.Sprintf("%s.p%d", k.Chain, n)
	}
	return k
}

// acquireSlot asks the pool for the attempt's slot, then waits in line if
// it has to. It returns once the slot is held, the attempt was refused
// one (it is then decided blocked), or a signal came (the loop acts on it;
// ending the attempt withdraws from the line).
func (r *taskRun) acquireSlot() error {
	a := &r.st.Current
	req := r.st.Slots
	if a.Slot == nil {
		a.Slot = &SlotHold{Pool: req.PoolOrDefault(), Since: workflow.Now(r.ctx)}
		ans, err := r.askPool()
		if err != nil {
			return err
		}
		if r.slotAnswered(ans) {
			return nil
		}
	}
	return r.awaitSlot()
}

// askPool sends the attempt's acquire to its pool, which answers at once.
// Asking again for the same key is harmless: the pool answers where the
// key stands.
func (r *taskRun) askPool() (slots.Answer, error) {
	req, pool := r.st.Slots, r.st.Current.Slot.Pool
	info := workflow.GetInfo(r.ctx)
	k := r.slotKey()
	var ans slots.Answer
	err := workflow.ExecuteActivity(acquireSlotOptions(r.ctx, fmt.Sprintf("acquire a slot in pool %s for %s", pool, k)),
		slotapi.ActivityAcquireSlot, slotapi.AcquireSlotRequest{Pool: pool, Request: slots.Request{
			Key: k, Run: req.Run, NoWait: req.NoWait, Timeout: req.Timeout,
			Owner: slots.Owner{WorkflowID: info.WorkflowExecution.ID, FirstRunID: info.FirstRunID},
		}}).Get(r.ctx, &ans)
	if err != nil {
		return slots.Answer{}, fmt.Errorf("acquire a slot in pool %s for %s: %w", pool, k, err)
	}
	return ans, nil
}

// awaitSlot waits in line for the pool's notice, a signal, or, with a
// timeout, the moment the pool should have refused.
func (r *taskRun) awaitSlot() error {
	a := &r.st.Current
	slotCh := workflow.GetSignalChannel(r.ctx, slotapi.SignalSlot)
	var expired workflow.Future
	if t := r.st.Slots.Timeout; t > 0 {
		tctx, cancel := workflow.WithCancel(r.ctx)
		defer cancel()
		grace := r.st.Tuning.Scale().Of(slotGrace)
		expired = workflow.NewTimer(tctx, max(a.Slot.Since.Add(t+grace).Sub(workflow.Now(r.ctx)), time.Millisecond))
	}
	// A pool that was terminated or cancelled never sends the notice: the
	// waiter asks again now and then, which a live pool answers with its
	// place in line and a gone one's successor answers afresh.
	var askAgain workflow.Future
	every := time.Duration(0)
	if workflow.GetVersion(r.ctx, versionSlotAskAgain, workflow.DefaultVersion, 1) == 1 {
		every = r.st.Tuning.SlotAskEveryOrDefault()
	}
	actx, cancelAsk := workflow.WithCancel(r.ctx)
	defer cancelAsk()
	if every > 0 {
		askAgain = workflow.NewTimer(actx, every)
	}
	for {
		var notice *slotapi.Notice
		timedOut, ask := false, false
		sel := workflow.NewSelector(r.ctx)
		sel.AddReceive(slotCh, func(c workflow.ReceiveChannel, _ bool) {
			var n slotapi.Notice
			c.Receive(r.ctx, &n)
			notice = &n
		})
		r.addSignalReceivers(sel)
		if expired != nil {
			sel.AddFuture(expired, func(workflow.Future) { timedOut = true })
		}
		if askAgain != nil {
			sel.AddFuture(askAgain, func(workflow.Future) { ask = true })
		}
		sel.Select(r.ctx)
		switch {
		case ask:
			ans, err := r.askPool()
			if err != nil {
				// The pool stays unreachable: keep waiting, ask again later.
				r.log.Warn("asking the slot pool again failed", "pool", a.Slot.Pool, "error", err)
			} else if r.slotAnswered(ans) {
				return nil
			}
			askAgain = workflow.NewTimer(actx, every)
		case notice != nil:
			// A notice for another attempt is stale: that attempt gave
			// its key back when it ended, which frees whatever it got.
			if notice.Pool == a.Slot.Pool && notice.Key == r.slotKey() && r.slotAnswered(notice.Answer) {
				return nil
			}
		case timedOut:
			r.log.Warn("no answer from the slot pool past the timeout; withdrawing", "pool", a.Slot.Pool)
			r.decide(noSlotOutcome(a.Slot.Pool, r.st.Slots, slots.Answer{State: slots.Refused, Reason: slots.ReasonTimeout}))
			return nil
		case r.st.Signals.PendingAbort || r.st.Signals.PendingRedispatch:
			return nil
		}
	}
}

// slotAnswered records the pool's answer and says whether it settles the
// wait: a grant, or a refusal (which decides the attempt blocked).
func (r *taskRun) slotAnswered(ans slots.Answer) bool {
	s := r.st.Current.Slot
	switch ans.State {
	case slots.Granted:
		s.Held, s.Position = true, 0
		r.log.Info("slot granted", "pool", s.Pool, "waited", workflow.Now(r.ctx).Sub(s.Since).String())
		return true
	case slots.Queued:
		s.Position = ans.Position
		r.log.Info("waiting for a slot", "pool", s.Pool, "position", ans.Position)
		r.showDetails()
		return false
	}
	s.Refused = ans.Reason
	if ans.State == slots.Released {
		s.Refused = slots.ReasonCancelled // only a stale request hears this
	}
	r.decide(noSlotOutcome(s.Pool, r.st.Slots, ans))
	return true
}

// releaseSlot gives the attempt's slot back, or its place in line; the
// pool grants it to the next waiter at once. A slot the pool refused has
// nothing to give back. Called when the attempt ends, however it ends.
func (r *taskRun) releaseSlot(ended string) {
	s := r.st.Current.Slot
	if s == nil || s.Released || s.Refused != "" {
		return
	}
	s.Released = true
	err := workflow.SignalExternalWorkflow(r.ctx, slotapi.WorkflowID(s.Pool), "", slotapi.SignalRelease,
		slotapi.ReleaseSignal{Key: r.slotKey(), Reason: ended}).Get(r.ctx, nil)
	if err != nil {
		// The pool is gone (terminated): there is nothing to give back to.
		r.log.Warn("slot not released", "pool", s.Pool, "error", err)
	}
}

// noSlotOutcome is an attempt that got no slot: blocked, saying which pool
// and why, e.g. "no agent slot in pool agents within 10m: timeout".
func noSlotOutcome(pool string, req *taskapi.SlotRequest, ans slots.Answer) mapping.Outcome {
	msg := "no agent slot in pool " + pool
	switch {
	case ans.Reason == slots.ReasonTimeout:
		msg += fmt.Sprintf(" within %s: timeout", shortDuration(req.Timeout))
	case ans.Detail != "":
		msg += fmt.Sprintf(": %s (%s)", ans.Reason, ans.Detail)
	case ans.Reason != "":
		msg += ": " + string(ans.Reason)
	default:
		msg += ": the pool answered " + string(ans.State)
	}
	return mapping.Outcome{
		PlanStatus: mapping.PlanBlocked, TaskStatus: mapping.TaskBlocked, DispatchState: mapping.DispatchFailed,
		LastError: msg, BlockerReason: msg, Code: 1, ErrorType: taskapi.ErrorNoSlot,
	}
}

// shortDuration writes 10m rather than 10m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// slotStatus is the attempt's slot for the status query.
func (r *taskRun) slotStatus() *taskapi.SlotStatus {
	s := r.st.Current.Slot
	if s == nil {
		return nil
	}
	out := &taskapi.SlotStatus{Pool: s.Pool, Since: s.Since, Position: s.Position, State: slotState(s, r.st.Current.Outcome)}
	if s.Refused != "" {
		out.Reason = string(s.Refused)
	}
	return out
}

func slotState(s *SlotHold, o *mapping.Outcome) string {
	switch {
	case s.Refused != "" || (!s.Held && o != nil && o.ErrorType == taskapi.ErrorNoSlot):
		return taskapi.SlotRefused
	case s.Released:
		return taskapi.SlotReleased
	case s.Held:
		return taskapi.SlotHeld
	}
	return taskapi.SlotWaiting
}

// slotWords is what the Web UI's details say of a wait in line, "" when
// the attempt is not waiting.
func slotWords(a *Attempt) string {
	s := a.Slot
	if s == nil || slotState(s, a.Outcome) != taskapi.SlotWaiting || a.Outcome != nil {
		return ""
	}
	if s.Position > 0 {
		return fmt.Sprintf("Waiting for a slot (position %d in pool %s) since %s.", s.Position, s.Pool, flowkit.Clock(s.Since))
	}
	return fmt.Sprintf("Waiting for a slot in pool %s since %s.", s.Pool, flowkit.Clock(s.Since))
}

// validSlotRequest refuses, before anything starts, a slot request the
// pool would refuse.
func validSlotRequest(s *taskapi.SlotRequest) error {
	if s == nil {
		return nil
	}
	err := slots.ValidPoolName(s.PoolOrDefault())
	if err == nil && s.Timeout < 0 {
		err = fmt.Errorf("slot timeout %s must not be negative", s.Timeout)
	}
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("invalid slot request: %v", err), activities.ErrInvalidDispatch, err)
	}
	return nil
}
