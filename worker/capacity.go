package main

import (
	"context"
	"fmt"
	"sync"

	"go.temporal.io/sdk/worker"
)

// A host's capacity is its own queue's activity slots (-max-activities):
// each running task holds one there, its delivering tail. The worker of
// the shared queue, where attempts start, takes an activity only while the
// host has a free one, so a busy host stops taking new attempts until a
// task ends, and they go to hosts with room. Were the two pools apart, a
// full host would go on starting attempts whose deliveries then wait on
// its queue, until the grace took the host for lost.

// hostSlots are the activity slots of the host's queue, counting those in
// use (a task being processed, not a poller waiting for one).
type hostSlots struct {
	worker.SlotSupplier
	max int

	mu    sync.Mutex
	used  map[*worker.SlotPermit]struct{}
	freed chan struct{} // closed, and replaced, whenever a used slot frees
}

func newHostSlots(n int) (*hostSlots, error) {
	inner, err := worker.NewFixedSizeSlotSupplier(n)
	if err != nil {
		return nil, fmt.Errorf("activity slots: %w", err)
	}
	return &hostSlots{SlotSupplier: inner, max: n, used: map[*worker.SlotPermit]struct{}{}, freed: make(chan struct{})}, nil
}

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
// but for their activity slots.
func tuners(maxActivities int) (shared, host worker.WorkerTuner, err error) {
	if maxActivities <= 0 {
		maxActivities = 1000 // the SDK's default
	}
	hs, err := newHostSlots(maxActivities)
	if err != nil {
		return nil, nil, err
	}
	own, err := worker.NewFixedSizeSlotSupplier(maxActivities)
	if err != nil {
		return nil, nil, fmt.Errorf("activity slots: %w", err)
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
		return nil, nil, err
	}
	if host, err = with(hs); err != nil {
		return nil, nil, err
	}
	return shared, host, nil
}
