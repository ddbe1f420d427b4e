package slots

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Defaults and bounds.
const (
	// DefaultPool is the pool a task joins when it asks for a slot without
	// naming one.
	DefaultPool = "agents"
	// DefaultMaxConcurrent is a new pool's limit until someone sets one.
	DefaultMaxConcurrent = 3
	// MaxConcurrentLimit and MaxTotalLimit bound what SetLimits accepts.
	MaxConcurrentLimit = 10000
	MaxTotalLimit      = 1000000
	// SettledKeep is how many settled keys (released or refused) the pool
	// remembers to answer a late repeat of their request; RunsKeep how many
	// runs it counts grants for (the least recently granted are forgotten).
	SettledKeep = 1000
	RunsKeep    = 1000
)

var poolNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ValidPoolName says whether name may name a pool: 1 to 64 characters of
// letters, digits, '-' and '_', starting with a letter or a digit.
func ValidPoolName(name string) error {
	if !poolNameRE.MatchString(name) {
		return fmt.Errorf("pool name %q must be 1-64 characters of A-Z a-z 0-9 _ - (not starting with _ or -)", name)
	}
	return nil
}

// Key names what holds or waits for a slot: one attempt of one task. Each
// attempt asks anew, so a redispatched task never inherits its previous
// attempt's slot or place in line. Chain is the nonce of the task
// workflow chain that made the attempt: another workflow of the same task
// numbers its attempts from 1 again, and without it would be answered
// what the pool answered the earlier one. Keys recorded before attempts
// had a nonce have none, and read as they did.
type Key struct {
	Task    string `json:"task"`
	Attempt int    `json:"attempt"`
	Chain   string `json:"chain,omitempty"`
}

func (k Key) String() string {
	if k.Chain != "" {
		return fmt.Sprintf("%s attempt %d (%s)", k.Task, k.Attempt, k.Chain)
	}
	return fmt.Sprintf("%s attempt %d", k.Task, k.Attempt)
}

// UpdateID is the id of the acquire update that asks for k: the server
// answers a repeated id from the first update's outcome, so it must name
// the attempt of one chain.
func (k Key) UpdateID() string {
	if k.Chain != "" {
		return fmt.Sprintf("acquire/%s/%d/%s", k.Task, k.Attempt, k.Chain)
	}
	return fmt.Sprintf("acquire/%s/%d", k.Task, k.Attempt)
}

// Owner is the workflow a holder or waiter belongs to: where its grant is
// sent, and what a check of the pool's holders looks at.
type Owner struct {
	WorkflowID string `json:"workflowId,omitempty"`
	// FirstRunID is the first run of the owner's continue-as-new chain: a
	// workflow with the same id but another chain is not the owner.
	FirstRunID string `json:"firstRunId,omitempty"`
}

// Request asks for a slot.
type Request struct {
	Key Key `json:"key"`
	// Run is the run the task belongs to (its slug); max_total counts per
	// run. A task outside any run counts as a run of its own.
	Run   string `json:"run,omitempty"`
	Owner Owner  `json:"owner"`
	// NoWait: refuse at once (max_concurrent) rather than queue.
	NoWait bool `json:"noWait,omitempty"`
	// Timeout bounds the wait in line; 0 waits as long as it takes.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Validate refuses a request the pool could not keep apart from others.
func (r Request) Validate() error {
	var errs []error
	if r.Key.Task == "" {
		errs = append(errs, errors.New("key: task is required"))
	} else if len(r.Key.Task) > 256 {
		errs = append(errs, fmt.Errorf("key: task is %d bytes, at most 256", len(r.Key.Task)))
	}
	if len(r.Key.Chain) > 64 {
		errs = append(errs, fmt.Errorf("key: chain is %d bytes, at most 64", len(r.Key.Chain)))
	}
	if r.Key.Attempt < 1 {
		errs = append(errs, fmt.Errorf("key: attempt %d must be at least 1", r.Key.Attempt))
	}
	if r.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s must not be negative", r.Timeout))
	}
	return errors.Join(errs...)
}

// group is what max_total counts in: the run, or the task on its own (a
// run slug holds no space, so the two never collide).
func group(run string, k Key) string {
	if run != "" {
		return run
	}
	return "task " + k.Task
}

// Limits are a pool's caps.
type Limits struct {
	// MaxConcurrent is how many slots may be held at once.
	MaxConcurrent int `json:"maxConcurrent"`
	// MaxTotal is how many slots one run may be granted over its life; 0
	// sets no limit.
	MaxTotal int `json:"maxTotal,omitempty"`
}

// Validate refuses limits the pool cannot work with.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxConcurrent < 1 || l.MaxConcurrent > MaxConcurrentLimit {
		errs = append(errs, fmt.Errorf("max_concurrent %d must be between 1 and %d", l.MaxConcurrent, MaxConcurrentLimit))
	}
	if l.MaxTotal < 0 || l.MaxTotal > MaxTotalLimit {
		errs = append(errs, fmt.Errorf("max_total %d must be between 0 (no limit) and %d", l.MaxTotal, MaxTotalLimit))
	}
	return errors.Join(errs...)
}

// Holder holds a slot.
type Holder struct {
	Key   Key       `json:"key"`
	Run   string    `json:"run,omitempty"`
	Owner Owner     `json:"owner"`
	Since time.Time `json:"since"`
	// LeaseUntil is when the holder is dropped unless renewed; zero when
	// the pool has no lease.
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
}

// Waiter waits in line for a slot.
type Waiter struct {
	Key   Key       `json:"key"`
	Run   string    `json:"run,omitempty"`
	Owner Owner     `json:"owner"`
	Since time.Time `json:"since"`
	// Timeout is how long it agreed to wait (0: as long as it takes);
	// Deadline is Since plus Timeout.
	Timeout  time.Duration `json:"timeout,omitempty"`
	Deadline time.Time     `json:"deadline,omitzero"`
}

// State is what an Answer says.
type State string

// The answers to a request.
const (
	Granted  State = "granted"
	Queued   State = "queued"
	Refused  State = "refused"
	Released State = "released" // the key was granted and given back already
)

// Reason is why a request was refused.
type Reason string

// Why the pool refuses.
const (
	// ReasonMaxConcurrent: every slot is held and the request would not wait.
	ReasonMaxConcurrent Reason = "max_concurrent"
	// ReasonMaxTotal: the request's run was granted max_total slots already.
	ReasonMaxTotal Reason = "max_total"
	// ReasonTimeout: the request waited its whole timeout in line.
	ReasonTimeout Reason = "timeout"
	// ReasonCancelled: the requester gave up waiting (released the key).
	ReasonCancelled Reason = "cancelled"
)

// Answer is the pool's answer to a request, or what a Notice tells a waiter.
type Answer struct {
	State State `json:"state"`
	// Position is a queued request's place in line: 1 is next.
	Position int    `json:"position,omitempty"`
	Reason   Reason `json:"reason,omitempty"`
	// Since: granted, when; queued, since when it waits.
	Since time.Time `json:"since,omitzero"`
	// Detail says more of a refusal, for a person.
	Detail string `json:"detail,omitempty"`
}

// Notice is an answer the pool owes a waiter: its grant, or its refusal.
type Notice struct {
	Key    Key    `json:"key"`
	Owner  Owner  `json:"owner"`
	Answer Answer `json:"answer"`
}

// Settled is a key the pool is done with and the last answer it gave it.
type Settled struct {
	Key    Key    `json:"key"`
	Answer Answer `json:"answer"`
}

// RunCount counts the grants of one run (max_total).
type RunCount struct {
	Run    string    `json:"run"`
	Grants int       `json:"grants"`
	Last   time.Time `json:"last"`
}

// Stats are the pool's running totals.
type Stats struct {
	Granted   int `json:"granted,omitempty"`
	Queued    int `json:"queued,omitempty"`
	Released  int `json:"released,omitempty"`
	Cancelled int `json:"cancelled,omitempty"`
	// Expired counts holders dropped because their lease ran out.
	Expired int `json:"expired,omitempty"`
	// Refused counts refusals by reason (cancellations not included).
	Refused map[Reason]int `json:"refused,omitempty"`
}

// Pool is a slot pool's whole state; it round-trips through JSON.
type Pool struct {
	Limits Limits `json:"limits"`
	// Lease is how long a holder keeps its slot without being renewed; 0:
	// for as long as it holds it.
	Lease   time.Duration `json:"lease,omitempty"`
	Holders []Holder      `json:"holders,omitempty"`
	Waiters []Waiter      `json:"waiters,omitempty"`
	Runs    []RunCount    `json:"runs,omitempty"`
	Settled []Settled     `json:"settled,omitempty"`
	Stats   Stats         `json:"stats"`
	// Fair serves the line round robin across parties (each run, and the
	// tasks outside any run as one more) rather than in order of arrival.
	// A pool kept before fair lines existed serves in order until its
	// keeper turns this on.
	Fair bool `json:"fair,omitempty"`
	// Turns counts the slots a fair line granted; Served says, for each
	// party waiting or holding, at which of them it was last served.
	Turns  uint64            `json:"turns,omitempty"`
	Served map[string]uint64 `json:"served,omitempty"`
}

// New is an empty pool with these limits.
func New(l Limits) Pool { return Pool{Limits: l} }

// Acquire answers a request. It grants a free slot when nobody waits
// ahead; otherwise it queues the request, or refuses it when it would not
// wait. A run that has had max_total grants is refused. Asking again for a
// key gets the answer it got before (see the package documentation).
func (p *Pool) Acquire(r Request, now time.Time) Answer {
	if i := p.holder(r.Key); i >= 0 {
		return Answer{State: Granted, Since: p.Holders[i].Since}
	}
	if i := p.waiter(r.Key); i >= 0 {
		return Answer{State: Queued, Position: p.Position(r.Key), Since: p.Waiters[i].Since}
	}
	if s, ok := p.settled(r.Key); ok {
		return s
	}
	if a, over := p.overTotal(r.Run, r.Key); over {
		p.settle(r.Key, a)
		return a
	}
	if len(p.Waiters) == 0 && len(p.Holders) < p.Limits.MaxConcurrent {
		return p.grant(r.Key, r.Run, r.Owner, now)
	}
	if r.NoWait {
		a := p.refuse(ReasonMaxConcurrent, fmt.Sprintf("all %d slots are held", p.Limits.MaxConcurrent))
		p.settle(r.Key, a)
		return a
	}
	w := Waiter{Key: r.Key, Run: r.Run, Owner: r.Owner, Since: now, Timeout: r.Timeout}
	if r.Timeout > 0 {
		w.Deadline = now.Add(r.Timeout)
	}
	p.Waiters = append(p.Waiters, w)
	p.Stats.Queued++
	return Answer{State: Queued, Position: p.Position(w.Key), Since: now}
}

// Gone says what Release found.
type Gone string

// What Release found for its key.
const (
	GoneHolder  Gone = "holder"  // a slot was given back
	GoneWaiter  Gone = "waiter"  // a waiter gave up (cancelled)
	GoneSettled Gone = "settled" // released or refused before: nothing to do
	GoneUnknown Gone = "unknown" // never seen: remembered as released
)

// Release gives the key's slot back, or takes it out of line, and grants
// freed slots to the waiters in order. It is idempotent. A key the pool
// never saw is remembered as released, so that a request for it arriving
// late is not granted.
func (p *Pool) Release(k Key, now time.Time) (Gone, []Notice) {
	if i := p.holder(k); i >= 0 {
		p.Holders = slices.Delete(p.Holders, i, i+1)
		p.settle(k, Answer{State: Released})
		p.Stats.Released++
		return GoneHolder, p.fill(now)
	}
	if i := p.waiter(k); i >= 0 {
		p.Waiters = slices.Delete(p.Waiters, i, i+1)
		p.settle(k, Answer{State: Refused, Reason: ReasonCancelled, Detail: "the request was withdrawn"})
		p.Stats.Cancelled++
		return GoneWaiter, nil
	}
	if _, ok := p.settled(k); ok {
		return GoneSettled, nil
	}
	p.settle(k, Answer{State: Released})
	return GoneUnknown, nil
}

// SetLimits changes the pool's limits at once: room made by a higher
// max_concurrent (or max_total) goes to the waiters now; a lower one takes
// no slot back, it only grants nothing until the holders are under it.
func (p *Pool) SetLimits(l Limits, now time.Time) ([]Notice, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	p.Limits = l
	return p.fill(now), nil
}

// ExpireWaiters refuses the waiters whose timeout has passed.
func (p *Pool) ExpireWaiters(now time.Time) []Notice {
	var out []Notice
	p.Waiters = slices.DeleteFunc(p.Waiters, func(w Waiter) bool {
		if w.Deadline.IsZero() || now.Before(w.Deadline) {
			return false
		}
		a := p.refuse(ReasonTimeout, fmt.Sprintf("waited %s in line", w.Timeout))
		p.settle(w.Key, a)
		out = append(out, Notice{Key: w.Key, Owner: w.Owner, Answer: a})
		return true
	})
	return out
}

// Renew extends the lease of these holders; other keys are ignored.
func (p *Pool) Renew(keys []Key, now time.Time) {
	if p.Lease <= 0 {
		return
	}
	for i := range p.Holders {
		if slices.Contains(keys, p.Holders[i].Key) {
			p.Holders[i].LeaseUntil = now.Add(p.Lease)
		}
	}
}

// ExpireLeases drops the holders whose lease ran out and grants their
// slots to the waiters. It returns the keys dropped and the notices.
func (p *Pool) ExpireLeases(now time.Time) ([]Key, []Notice) {
	var dropped []Key
	p.Holders = slices.DeleteFunc(p.Holders, func(h Holder) bool {
		if h.LeaseUntil.IsZero() || !now.After(h.LeaseUntil) {
			return false
		}
		dropped = append(dropped, h.Key)
		return true
	})
	for _, k := range dropped {
		p.settle(k, Answer{State: Released, Detail: "lease expired"})
		p.Stats.Expired++
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	return dropped, p.fill(now)
}

// NextDeadline is the earliest waiter deadline, zero when none waits with
// a timeout: when ExpireWaiters has something to do next.
func (p *Pool) NextDeadline() time.Time {
	var next time.Time
	for _, w := range p.Waiters {
		if !w.Deadline.IsZero() && (next.IsZero() || w.Deadline.Before(next)) {
			next = w.Deadline
		}
	}
	return next
}

// Position is the key's place in line (1 is next), 0 when it is not
// waiting.
func (p *Pool) Position(k Key) int {
	return slices.IndexFunc(p.Line(), func(w Waiter) bool { return w.Key == k }) + 1
}

// Holds says whether the key holds a slot.
func (p *Pool) Holds(k Key) bool { return p.holder(k) >= 0 }

// Granted is how many slots the run (or a task outside any run) has been
// granted, as far as the pool remembers.
func (p *Pool) Granted(run string, k Key) int {
	g := group(run, k)
	for _, c := range p.Runs {
		if c.Run == g {
			return c.Grants
		}
	}
	return 0
}

// Check verifies the pool's invariants: no key twice among holders and
// waiters, none of them settled, and nobody waiting while a slot is free.
func (p *Pool) Check() error {
	seen := map[Key]bool{}
	for _, h := range p.Holders {
		if seen[h.Key] {
			return fmt.Errorf("%s holds or waits twice", h.Key)
		}
		seen[h.Key] = true
	}
	for _, w := range p.Waiters {
		if seen[w.Key] {
			return fmt.Errorf("%s holds or waits twice", w.Key)
		}
		seen[w.Key] = true
	}
	for _, s := range p.Settled {
		if seen[s.Key] {
			return fmt.Errorf("%s is settled and still holds or waits", s.Key)
		}
	}
	if len(p.Waiters) > 0 && len(p.Holders) < p.Limits.MaxConcurrent {
		return fmt.Errorf("%d waiting with %d of %d slots held", len(p.Waiters), len(p.Holders), p.Limits.MaxConcurrent)
	}
	return nil
}

// fill grants free slots to the waiters in line order (Line), refusing
// those whose run reached max_total on the way.
func (p *Pool) fill(now time.Time) []Notice {
	var out []Notice
	for len(p.Waiters) > 0 && len(p.Holders) < p.Limits.MaxConcurrent {
		i := p.next()
		w := p.Waiters[i]
		p.Waiters = slices.Delete(p.Waiters, i, i+1)
		if a, over := p.overTotal(w.Run, w.Key); over {
			p.settle(w.Key, a)
			out = append(out, Notice{Key: w.Key, Owner: w.Owner, Answer: a})
			continue
		}
		out = append(out, Notice{Key: w.Key, Owner: w.Owner, Answer: p.grant(w.Key, w.Run, w.Owner, now)})
	}
	if len(p.Waiters) == 0 {
		p.Waiters = nil
	}
	return out
}

func (p *Pool) grant(k Key, run string, o Owner, now time.Time) Answer {
	h := Holder{Key: k, Run: run, Owner: o, Since: now}
	if p.Lease > 0 {
		h.LeaseUntil = now.Add(p.Lease)
	}
	p.Holders = append(p.Holders, h)
	p.served(run)
	p.count(group(run, k), now)
	p.Stats.Granted++
	return Answer{State: Granted, Since: now}
}

func (p *Pool) overTotal(run string, k Key) (Answer, bool) {
	if p.Limits.MaxTotal <= 0 {
		return Answer{}, false
	}
	n := p.Granted(run, k)
	if n < p.Limits.MaxTotal {
		return Answer{}, false
	}
	who := "run " + run
	if run == "" {
		who = "task " + k.Task
	}
	return p.refuse(ReasonMaxTotal, fmt.Sprintf("%s was granted %d slots, max_total is %d", who, n, p.Limits.MaxTotal)), true
}

func (p *Pool) refuse(r Reason, detail string) Answer {
	if p.Stats.Refused == nil {
		p.Stats.Refused = map[Reason]int{}
	}
	p.Stats.Refused[r]++
	return Answer{State: Refused, Reason: r, Detail: detail}
}

// count adds a grant to its run, forgetting the least recently granted run
// when it counts too many.
func (p *Pool) count(g string, now time.Time) {
	for i := range p.Runs {
		if p.Runs[i].Run == g {
			p.Runs[i].Grants++
			p.Runs[i].Last = now
			return
		}
	}
	p.Runs = append(p.Runs, RunCount{Run: g, Grants: 1, Last: now})
	if len(p.Runs) > RunsKeep {
		oldest := 0
		for i, c := range p.Runs {
			if c.Last.Before(p.Runs[oldest].Last) {
				oldest = i
			}
		}
		p.Runs = slices.Delete(p.Runs, oldest, oldest+1)
	}
}

func (p *Pool) settle(k Key, a Answer) {
	p.Settled = append(p.Settled, Settled{Key: k, Answer: a})
	if n := len(p.Settled) - SettledKeep; n > 0 {
		p.Settled = slices.Delete(p.Settled, 0, n)
	}
}

func (p *Pool) settled(k Key) (Answer, bool) {
	for i := len(p.Settled) - 1; i >= 0; i-- {
		if p.Settled[i].Key == k {
			return p.Settled[i].Answer, true
		}
	}
	return Answer{}, false
}

func (p *Pool) holder(k Key) int {
	return slices.IndexFunc(p.Holders, func(h Holder) bool { return h.Key == k })
}

func (p *Pool) waiter(k Key) int {
	return slices.IndexFunc(p.Waiters, func(w Waiter) bool { return w.Key == k })
}
