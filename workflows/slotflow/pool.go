package slotflow

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/slotact"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/internal/metrics"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/slots"
	"karvi-edda-temporal/workflows/flowkit"
)

// slotActs is only used for its method values, like acts.
var slotActs *slotact.Activities

// defaultPoolContinueAsNewAfter bounds a pool's history when Temporal does
// not suggest continuing sooner: every grant costs a handful of events
// (the acquire update, the grant signal, the release).
const defaultPoolContinueAsNewAfter = 3000

// SlotPoolWorkflow keeps one agent slot pool: how many conductors may run
// at once across every task, run and worker that names it. It is an entity
// workflow, started on demand by the first acquire and running until
// terminated, continuing-as-new with its holders and waiters.
//
// Acquire is an update answered at once (granted, queued with the place in
// line, or refused), one request per acquire update or many per
// acquire-many (a worker batches its tasks' acquires); it never waits for
// a slot, since Temporal allows only
// a few updates in flight per workflow. A waiter hears of its grant or its
// refusal later, by a signal to its own workflow. Release is a signal. A
// released slot goes to the next waiter at once. Every CheckEvery the pool
// describes its holders' workflows: one that closed without releasing its
// slot loses it, and a holder nobody could vouch for within the lease is
// dropped too.
func SlotPoolWorkflow(ctx workflow.Context, in slotapi.PoolInput) error {
	p, err := newPoolFlow(ctx, in)
	if err != nil {
		return err
	}
	// Pools serve their line by turns across runs; one recorded before
	// that serves in order of arrival until it continues as new.
	if workflow.GetVersion(ctx, versionFairPools, workflow.DefaultVersion, 1) == 1 {
		p.st.Pool.Fair = true
	}
	if err := p.setup(); err != nil {
		return err
	}
	return p.loop()
}

// poolState is what a pool carries across continue-as-new.
type poolState struct {
	Pool       slots.Pool    `json:"pool"`
	CheckEvery time.Duration `json:"checkEvery"`
	LastCheck  time.Time     `json:"lastCheck,omitzero"`
	// Outbox holds the notices not yet known to be delivered.
	Outbox         []slots.Notice `json:"outbox,omitempty"`
	Dropped        int            `json:"dropped,omitempty"`
	ContinuedAsNew int            `json:"continuedAsNew,omitempty"`
}

type poolFlow struct {
	ctx  workflow.Context
	log  log.Logger
	name string
	in   slotapi.PoolInput
	st   poolState

	releaseCh workflow.ReceiveChannel
	// wake is how an update handler tells the loop to look again.
	wake workflow.Channel
	// sending are the notices whose signal is under way.
	sending []*poolSend
	// check is the holders' check under way, nil when none.
	check workflow.Future
	// timer wakes the loop at timerAt for a waiter's timeout or the next
	// check; cancelTimer drops it when an earlier wake is wanted.
	timer       workflow.Future
	timerAt     time.Time
	cancelTimer workflow.CancelFunc
}

type poolSend struct {
	notice slots.Notice
	fut    workflow.Future
}

func newPoolFlow(ctx workflow.Context, in slotapi.PoolInput) (*poolFlow, error) {
	if err := slots.ValidPoolName(in.Pool); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), slotact.ErrBadSlotRequest, err)
	}
	p := &poolFlow{ctx: ctx, log: workflow.GetLogger(ctx), name: in.Pool, in: in}
	if len(in.Resume) > 0 {
		if err := json.Unmarshal(in.Resume, &p.st); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("pool state handed over by continue-as-new: %v", err), "BadState", err)
		}
		p.st.ContinuedAsNew++
		return p, nil
	}
	limits := slots.Limits{MaxConcurrent: slots.DefaultMaxConcurrent}
	if in.Limits != nil {
		limits = *in.Limits
	}
	if err := limits.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), slotact.ErrBadSlotRequest, err)
	}
	p.st.Pool = slots.New(limits)
	p.setCheckEvery(in.CheckEvery)
	p.st.LastCheck = workflow.Now(ctx)
	return p, nil
}

func (p *poolFlow) setCheckEvery(d time.Duration) {
	if d <= 0 {
		d = timescale.Scale(p.in.TimeScale).Of(slotapi.DefaultCheckEvery)
	}
	p.st.CheckEvery = d
	p.st.Pool.Lease = slotapi.LeaseChecks * d
}

func (p *poolFlow) setup() error {
	p.releaseCh = workflow.GetSignalChannel(p.ctx, slotapi.SignalRelease)
	p.wake = workflow.NewBufferedChannel(p.ctx, 1)
	if err := workflow.SetQueryHandlerWithOptions(p.ctx, slotapi.QuerySlots, func() (slotapi.View, error) {
		return p.view(), nil
	}, workflow.QueryHandlerOptions{Description: "the pool's limits, holders and waiters (starter slots)"}); err != nil {
		return fmt.Errorf("register slots query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(p.ctx, slotapi.UpdateAcquire,
		func(ctx workflow.Context, r slots.Request) (slots.Answer, error) {
			a := p.st.Pool.Acquire(r, workflow.Now(ctx))
			p.log.Info("acquire", "key", r.Key.String(), "run", r.Run, "answer", string(a.State), "position", a.Position, "reason", string(a.Reason))
			p.poke()
			return a, nil
		}, workflow.UpdateHandlerOptions{
			Validator:   func(r slots.Request) error { return r.Validate() },
			Description: `{"key":{"task","attempt"}, "run", "owner", "noWait", "timeout"}: a slot now, a place in line, or a refusal`,
		}); err != nil {
		return fmt.Errorf("register acquire update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(p.ctx, slotapi.UpdateAcquireMany,
		func(ctx workflow.Context, m slotapi.AcquireMany) (slotapi.AcquireManyResult, error) {
			return p.acquireMany(workflow.Now(ctx), m), nil
		}, workflow.UpdateHandlerOptions{
			Validator:   func(m slotapi.AcquireMany) error { return m.Validate() },
			Description: `{"requests": [acquire, ...]}: each request answered as acquire would, in order, in one update`,
		}); err != nil {
		return fmt.Errorf("register acquire-many update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(p.ctx, slotapi.UpdateSet,
		func(ctx workflow.Context, r slotapi.SetRequest) (slotapi.View, error) {
			l := p.limitsFor(r)
			notices, err := p.st.Pool.SetLimits(l, workflow.Now(ctx))
			if err != nil {
				return slotapi.View{}, err
			}
			if r.CheckEvery > 0 {
				p.setCheckEvery(r.CheckEvery)
			}
			p.log.Info("limits set", "maxConcurrent", l.MaxConcurrent, "maxTotal", l.MaxTotal, "checkEvery", p.st.CheckEvery, "granted", len(notices))
			p.st.Outbox = append(p.st.Outbox, notices...)
			p.poke()
			return p.view(), nil
		}, workflow.UpdateHandlerOptions{
			Validator:   func(r slotapi.SetRequest) error { return r.Validate() },
			Description: `{"maxConcurrent", "maxTotal", "checkEvery"}: change the limits now; raising grants waiters at once`,
		}); err != nil {
		return fmt.Errorf("register set update: %w", err)
	}
	return nil
}

// acquireMany answers each request of a batch in order, as the acquire
// update would have answered it alone; a malformed one gets its refusal
// and does not stop the others.
func (p *poolFlow) acquireMany(now time.Time, m slotapi.AcquireMany) slotapi.AcquireManyResult {
	res := slotapi.AcquireManyResult{Answers: make([]slotapi.ManyAnswer, len(m.Requests))}
	for i, r := range m.Requests {
		if err := r.Validate(); err != nil {
			res.Answers[i].Error = err.Error()
			continue
		}
		a := p.st.Pool.Acquire(r, now)
		res.Answers[i].Answer = a
		p.log.Info("acquire", "key", r.Key.String(), "run", r.Run, "answer", string(a.State), "position", a.Position, "reason", string(a.Reason), "batch", len(m.Requests))
	}
	p.poke()
	return res
}

// limitsFor is the pool's limits with a set request applied.
func (p *poolFlow) limitsFor(r slotapi.SetRequest) slots.Limits {
	l := slots.Limits{MaxConcurrent: r.MaxConcurrent, MaxTotal: p.st.Pool.Limits.MaxTotal}
	if r.MaxTotal != nil {
		l.MaxTotal = *r.MaxTotal
	}
	return l
}

func (p *poolFlow) poke() { p.wake.SendAsync(true) }

func (p *poolFlow) loop() error {
	for {
		p.expireWaiters()
		p.send()
		p.startCheck()
		p.showDetails()
		if p.shouldContinueAsNew() {
			return p.continueAsNew()
		}
		sel := workflow.NewSelector(p.ctx)
		sel.AddReceive(p.releaseCh, func(c workflow.ReceiveChannel, _ bool) {
			var s slotapi.ReleaseSignal
			c.Receive(p.ctx, &s)
			p.release(s)
		})
		sel.AddReceive(p.wake, func(c workflow.ReceiveChannel, _ bool) {
			var poked bool
			c.Receive(p.ctx, &poked)
		})
		for _, s := range p.sending {
			sel.AddFuture(s.fut, func(f workflow.Future) { p.sent(s, f.Get(p.ctx, nil)) })
		}
		if p.check != nil {
			sel.AddFuture(p.check, func(f workflow.Future) { p.checked(f) })
		}
		if p.armTimer() {
			sel.AddFuture(p.timer, func(workflow.Future) { p.timer, p.cancelTimer = nil, nil })
		}
		cancelled := false
		sel.AddReceive(p.ctx.Done(), func(workflow.ReceiveChannel, bool) { cancelled = true })
		sel.Select(p.ctx)
		if cancelled {
			// A pool asked to stop forgets its holders: the next acquire
			// starts a fresh one.
			p.log.Warn("pool cancelled", "pool", p.name, "holders", len(p.st.Pool.Holders), "waiters", len(p.st.Pool.Waiters))
			return p.ctx.Err()
		}
	}
}

func (p *poolFlow) release(s slotapi.ReleaseSignal) slots.Gone {
	gone, notices := p.st.Pool.Release(s.Key, workflow.Now(p.ctx))
	p.log.Info("release", "key", s.Key.String(), "was", string(gone), "reason", s.Reason, "granted", len(notices))
	p.st.Outbox = append(p.st.Outbox, notices...)
	return gone
}

// drop frees the slot of a holder that will never release it.
func (p *poolFlow) drop(k slots.Key, why string) {
	if p.release(slotapi.ReleaseSignal{Key: k, Reason: why}) == slots.GoneHolder {
		p.st.Dropped++
	}
}

func (p *poolFlow) expireWaiters() {
	for _, n := range p.st.Pool.ExpireWaiters(workflow.Now(p.ctx)) {
		p.log.Info("waiter timed out", "key", n.Key.String())
		p.st.Outbox = append(p.st.Outbox, n)
	}
}

// send signals every notice of the outbox to its waiter's workflow.
func (p *poolFlow) send() {
	for _, n := range p.st.Outbox {
		if n.Owner.WorkflowID == "" {
			continue // nobody to tell: a request made without an owner
		}
		f := workflow.SignalExternalWorkflow(p.ctx, n.Owner.WorkflowID, "", slotapi.SignalSlot, slotapi.Notice{Pool: p.name, Notice: n})
		p.sending = append(p.sending, &poolSend{notice: n, fut: f})
	}
	p.st.Outbox = nil
}

// sent takes a signal's outcome. A grant whose workflow cannot be told is a
// grant nobody will use or give back: its slot goes to the next waiter.
func (p *poolFlow) sent(s *poolSend, err error) {
	for i, x := range p.sending {
		if x == s {
			p.sending = append(p.sending[:i], p.sending[i+1:]...)
			break
		}
	}
	if err == nil {
		return
	}
	n := s.notice
	p.log.Warn("waiter not reachable", "key", n.Key.String(), "workflow", n.Owner.WorkflowID, "error", err)
	if n.Answer.State == slots.Granted {
		p.drop(n.Key, "its workflow could not be told of its grant")
	}
}

// startCheck describes the holders' workflows when a check is due.
func (p *poolFlow) startCheck() {
	if p.check != nil || len(p.st.Pool.Holders) == 0 || workflow.Now(p.ctx).Before(p.nextCheck()) {
		return
	}
	req := slotact.CheckHoldersRequest{Pool: p.name, Holders: append([]slots.Holder(nil), p.st.Pool.Holders...)}
	p.check = workflow.ExecuteActivity(checkHoldersOptions(p.ctx, fmt.Sprintf("check the %d holders of pool %s", len(req.Holders), p.name)),
		slotActs.CheckHolders, req)
}

func (p *poolFlow) nextCheck() time.Time { return p.st.LastCheck.Add(p.st.CheckEvery) }

// checked frees the slots of holders whose workflow closed, renews the
// lease of those that run, and drops those nobody vouched for within it.
// Leases expire only here, after a check: a pool that was itself stopped
// for a while does not drop its holders for the silence.
func (p *poolFlow) checked(f workflow.Future) {
	p.check = nil
	now := workflow.Now(p.ctx)
	p.st.LastCheck = now
	var res slotact.CheckHoldersResult
	if err := f.Get(p.ctx, &res); err != nil {
		p.log.Warn("holders not checked", "error", err)
		return
	}
	for _, c := range res.Closed {
		p.drop(c.Key, c.Why)
	}
	p.st.Pool.Renew(res.Running, now)
	dropped, notices := p.st.Pool.ExpireLeases(now)
	for _, k := range dropped {
		p.log.Warn("holder's lease expired", "key", k.String())
	}
	p.st.Outbox = append(p.st.Outbox, notices...)
}

// armTimer makes sure a timer wakes the loop at the next waiter's deadline
// or the next check, whichever comes first, and says whether one is set.
// A timer already due no later than that is kept: replacing timers on
// every event would fill history with cancellations.
func (p *poolFlow) armTimer() bool {
	want := p.st.Pool.NextDeadline()
	if len(p.st.Pool.Holders) > 0 && p.check == nil {
		if next := p.nextCheck(); want.IsZero() || next.Before(want) {
			want = next
		}
	}
	if want.IsZero() {
		return p.timer != nil
	}
	if p.timer != nil && !p.timerAt.After(want) {
		return true
	}
	if p.cancelTimer != nil {
		p.cancelTimer()
	}
	d := want.Sub(workflow.Now(p.ctx))
	if d < time.Millisecond {
		d = time.Millisecond
	}
	tctx, cancel := workflow.WithCancel(p.ctx)
	p.timer = workflow.NewTimer(tctx, d)
	p.timerAt, p.cancelTimer = want, cancel
	return true
}

// shouldContinueAsNew: when Temporal suggests it or history passed the
// pool's bound, and no update handler is still running.
func (p *poolFlow) shouldContinueAsNew() bool {
	info := workflow.GetInfo(p.ctx)
	limit := p.in.ContinueAsNewAfter
	if limit <= 0 {
		limit = defaultPoolContinueAsNewAfter
	}
	if !info.GetContinueAsNewSuggested() && info.GetCurrentHistoryLength() < limit {
		return false
	}
	return workflow.AllHandlersFinished(p.ctx)
}

// continueAsNew hands the whole pool over: holders, waiters, and every
// notice not yet known to be delivered (a notice sent twice is harmless:
// a waiter ignores what it knows already). Releases already delivered are
// applied first.
func (p *poolFlow) continueAsNew() error {
	for {
		var s slotapi.ReleaseSignal
		if !p.releaseCh.ReceiveAsync(&s) {
			break
		}
		p.release(s)
	}
	for _, s := range p.sending {
		p.st.Outbox = append(p.st.Outbox, s.notice)
	}
	data, err := json.Marshal(p.st)
	if err != nil {
		return fmt.Errorf("hand over the pool state: %w", err)
	}
	next := p.in
	next.Resume = data
	p.log.Info("continuing as new", "pool", p.name, "holders", len(p.st.Pool.Holders), "waiters", len(p.st.Pool.Waiters))
	return workflow.NewContinueAsNewError(p.ctx, slotapi.PoolWorkflowName, next)
}

func (p *poolFlow) view() slotapi.View {
	v := slotapi.NewView(p.name, &p.st.Pool)
	v.CheckEvery = p.st.CheckEvery
	v.LastCheck = p.st.LastCheck
	v.Dropped = p.st.Dropped
	v.ContinuedAsNew = p.st.ContinuedAsNew
	v.UpdatedAt = workflow.Now(p.ctx)
	return v
}

// showDetails is the pool as the Web UI shows it: its limits, who holds
// a slot and how long the line is.
func (p *poolFlow) showDetails() {
	pl := &p.st.Pool
	metrics.Pool(workflow.GetMetricsHandler(p.ctx), p.name, len(pl.Holders), len(pl.Waiters), pl.Limits.MaxConcurrent)
	var b strings.Builder
	total := "no max_total"
	if pl.Limits.MaxTotal > 0 {
		total = fmt.Sprintf("max_total %d per run", pl.Limits.MaxTotal)
	}
	b.WriteString(fmt.Sprintf("**pool %s** · %d of %d slots held · %d waiting · %s\n\n",
		p.name, len(pl.Holders), pl.Limits.MaxConcurrent, len(pl.Waiters), total))
	if len(pl.Holders) > 0 {
		b.WriteString("| holder | attempt | run | since |\n|---|---|---|---|\n")
		for i, h := range pl.Holders {
			if i == 50 {
				b.WriteString(fmt.Sprintf("| ... %d more | | | |\n", len(pl.Holders)-i))
				break
			}
			b.WriteString(fmt.Sprintf("| %s | %d | %s | %s |\n", h.Key.Task, h.Key.Attempt, h.Run, flowkit.Clock(h.Since)))
		}
	}
	if len(pl.Waiters) > 0 {
		w := pl.Waiters[0]
		b.WriteString(fmt.Sprintf("\nnext in line: %s attempt %d, waiting since %s\n", w.Key.Task, w.Key.Attempt, flowkit.Clock(w.Since)))
	}
	workflow.SetCurrentDetails(p.ctx, b.String())
}
