package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/internal/timescale"
)

// A host's capacity is its own queue's activity slots (-max-activities):
// each running task holds one there, its delivering tail. The worker of
// the shared queue, where attempts start, takes an activity only while the
// host has a free one, so a busy host stops taking new attempts until a
// task ends, and they go to hosts with room (an attempt claims its host
// there, ClaimHost, then starts on the host's own queue). Were the two pools apart, a
// full host would go on starting attempts whose deliveries then wait on
// its queue, until the grace took the host for lost.

//
// The shared poller's gate only throttles polling: a slot freed between two
// deliveries of a running task (the workflow-task gap) lets it poll, and
// the claim it then receives would find the host full again. So a claim is
// also checked where it arrives (admit): the host counts the tasks it
// carries, each from its start's admission to hostHold after its last
// activity on the host, not its slots in use at that instant; a claim that
// finds the host full is handed back with a retryable error, and Temporal
// gives it to a host with room. Deliveries of admitted tasks then always
// find a slot, and never wait long enough for the host to be taken for
// lost.

// hostHold is how long a task holds its place on the host after its last
// activity there ended: longer than the gap between two deliveries (a
// workflow task), short enough that a finished task's place frees soon.
const hostHold = 15 * time.Second

// minHostHold is the least a time scale makes of hostHold: the gap between
// two deliveries is a workflow task's real latency, which no scale shortens.
const minHostHold = 2 * time.Second

// hostHoldAt is hostHold at the time scale s.
func hostHoldAt(s timescale.Scale) time.Duration {
	return max(s.Of(hostHold), min(hostHold, minHostHold))
}

// errHostFull is the type of the error a start gets from a full host.
const errHostFull = "HostFull"

// hostSlots are the activity slots of the host's queue, counting those in
// use (a task being processed, not a poller waiting for one), and the
// tasks the host carries.
type hostSlots struct {
	worker.SlotSupplier
	max int
	now func() time.Time
	// hold is hostHold at the worker's time scale.
	hold time.Duration

	mu    sync.Mutex
	used  map[*worker.SlotPermit]struct{}
	freed chan struct{} // closed, and replaced, whenever a used slot frees
	// tasks are the workflows the host carries: activities in flight, and
	// when the last one ended (a zero time while one runs).
	tasks map[string]*hostTask
}

type hostTask struct {
	running int
	until   time.Time
}

func newHostSlots(n int) (*hostSlots, error) {
	inner, err := worker.NewFixedSizeSlotSupplier(n)
	if err != nil {
		return nil, fmt.Errorf("activity slots: %w", err)
	}
	return &hostSlots{SlotSupplier: inner, max: n, now: time.Now, hold: hostHold, used: map[*worker.SlotPermit]struct{}{},
		freed: make(chan struct{}), tasks: map[string]*hostTask{}}, nil
}

// carried counts the tasks the host holds a place for, other than skip,
// forgetting those whose hold lapsed. Called with mu held.
func (h *hostSlots) carried(skip string) int {
	now := h.now()
	n := 0
	for id, t := range h.tasks {
		if t.running == 0 && !now.Before(t.until) {
			delete(h.tasks, id)
			continue
		}
		if id != skip {
			n++
		}
	}
	return n
}

// admit decides whether the host takes a new attempt of task id: only when
// the tasks it carries, that one aside (a task's next attempt takes its
// own place), leave room. An admitted task holds its place from now on.
func (h *hostSlots) admit(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.carried(id) >= h.max {
		return false
	}
	t := h.tasks[id]
	if t == nil {
		t = &hostTask{}
		h.tasks[id] = t
	}
	if until := h.now().Add(h.hold); until.After(t.until) {
		t.until = until
	}
	return true
}

// begin and end bracket an activity of task id on the host.
func (h *hostSlots) begin(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tasks[id]
	if t == nil {
		t = &hostTask{}
		h.tasks[id] = t
	}
	t.running++
}

func (h *hostSlots) end(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.tasks[id]; t != nil {
		t.running = max(t.running-1, 0)
		t.until = h.now().Add(h.hold)
	}
}

// hostGate is the interceptor of both workers of a host: every activity on
// the host's queue holds its task's place; a claim on the shared queue
// (ClaimHost, or StartAttempt in histories from before claims) is admitted
// only with room, else handed back retryably.
type hostGate struct {
	interceptor.WorkerInterceptorBase
	host   *hostSlots
	shared bool
}

func (g *hostGate) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	in := &gatedActivity{gate: *g}
	in.Next = next
	return in
}

type gatedActivity struct {
	interceptor.ActivityInboundInterceptorBase
	gate hostGate
}

func (a *gatedActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	id := info.WorkflowExecution.ID
	switch {
	case !a.gate.shared:
	case info.ActivityType.Name == claimActivity || info.ActivityType.Name == startActivity:
		if !a.gate.host.admit(id) {
			return nil, temporal.NewApplicationError(fmt.Sprintf(
				"this host carries %d task(s), its -max-activities: the start goes to a host with room",
				a.gate.host.max), errHostFull)
		}
	default:
		return a.Next.ExecuteActivity(ctx, in)
	}
	a.gate.host.begin(id)
	defer a.gate.host.end(id)
	return a.Next.ExecuteActivity(ctx, in)
}

// claimActivity takes an attempt for the host (its start then comes on
// the host's own queue); startActivity starts an attempt's conductor, on
// the shared queue in histories from before claims.
const (
	claimActivity = "ClaimHost"
	startActivity = "StartAttempt"
)

func (h *hostSlots) MarkSlotUsed(info worker.SlotMarkUsedInfo) {
	h.use(info.Permit())
	h.SlotSupplier.MarkSlotUsed(info)
}

func (h *hostSlots) ReleaseSlot(info worker.SlotReleaseInfo) {
	h.SlotSupplier.ReleaseSlot(info)
	h.free(info.Permit())
}

// use notes a slot taken by a task; free notes any slot given back.
func (h *hostSlots) use(p *worker.SlotPermit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.used[p] = struct{}{}
}

func (h *hostSlots) free(p *worker.SlotPermit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.used[p]; ok {
		delete(h.used, p)
		close(h.freed)
		h.freed = make(chan struct{})
	}
}

// hasRoom reports whether a slot of the host is free.
func (h *hostSlots) hasRoom() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.used) < h.max
}

// room waits until a slot of the host is free, or ctx ends.
func (h *hostSlots) room(ctx context.Context) error {
	for {
		h.mu.Lock()
		if len(h.used) < h.max {
			h.mu.Unlock()
			return nil
		}
		freed := h.freed
		h.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// gatedSlots are the shared queue's activity slots, handed out only while
// the host has room.
type gatedSlots struct {
	worker.SlotSupplier
	host *hostSlots
}

func (g gatedSlots) ReserveSlot(ctx context.Context, info worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	if err := g.host.room(ctx); err != nil {
		return nil, err
	}
	return g.SlotSupplier.ReserveSlot(ctx, info)
}

func (g gatedSlots) TryReserveSlot(info worker.SlotReservationInfo) *worker.SlotPermit {
	if !g.host.hasRoom() {
		return nil
	}
	return g.SlotSupplier.TryReserveSlot(info)
}

// tuners are the shared and the host worker's tuners: the SDK's defaults
// but for their activity slots; and the host's slots, for the gate.
func tuners(maxActivities int, scale timescale.Scale) (shared, host worker.WorkerTuner, hs *hostSlots, err error) {
	if maxActivities <= 0 {
		maxActivities = 1000 // the SDK's default
	}
	hs, err = newHostSlots(maxActivities)
	if err != nil {
		return nil, nil, nil, err
	}
	hs.hold = hostHoldAt(scale)
	own, err := worker.NewFixedSizeSlotSupplier(maxActivities)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("activity slots: %w", err)
	}
	with := func(activities worker.SlotSupplier) (worker.WorkerTuner, error) {
		d, err := worker.NewFixedSizeTuner(worker.FixedSizeTunerOptions{NumActivitySlots: maxActivities})
		if err != nil {
			return nil, err
		}
		return worker.NewCompositeTuner(worker.CompositeTunerOptions{
			WorkflowSlotSupplier:        d.GetWorkflowTaskSlotSupplier(),
			ActivitySlotSupplier:        activities,
			LocalActivitySlotSupplier:   d.GetLocalActivitySlotSupplier(),
			NexusSlotSupplier:           d.GetNexusSlotSupplier(),
			SessionActivitySlotSupplier: d.GetSessionActivitySlotSupplier(),
		})
	}
	if shared, err = with(gatedSlots{SlotSupplier: own, host: hs}); err != nil {
		return nil, nil, nil, err
	}
	if host, err = with(hs); err != nil {
		return nil, nil, nil, err
	}
	return shared, host, hs, nil
}
