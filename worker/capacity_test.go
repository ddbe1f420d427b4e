package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// The shared queue's worker takes activities only while the host has a
// slot free for a task: a slot reserved by a waiting poller leaves room,
// one in use does not, and freeing one lets the shared worker poll again.
func TestSharedSlotsWaitForTheHostsRoom(t *testing.T) {
	host, err := newHostSlots(2)
	require.NoError(t, err)
	own, err := worker.NewFixedSizeSlotSupplier(10)
	require.NoError(t, err)
	shared := gatedSlots{SlotSupplier: own, host: host}
	ctx := context.Background()

	var taken []*worker.SlotPermit
	for range 2 {
		p, err := host.ReserveSlot(ctx, nil)
		require.NoError(t, err)
		taken = append(taken, p)
	}
	require.NotNil(t, shared.TryReserveSlot(nil), "reserved by pollers, not in use: room")
	host.use(taken[0])
	require.NotNil(t, shared.TryReserveSlot(nil), "one of two in use: room")
	host.use(taken[1])
	require.Nil(t, shared.TryReserveSlot(nil), "both in use: no room")

	got := make(chan error, 1)
	go func() {
		_, err := shared.ReserveSlot(ctx, nil)
		got <- err
	}()
	host.free(taken[0])
	require.NoError(t, <-got, "a freed slot lets the shared worker poll")

	cctx, cancel := context.WithCancel(ctx)
	host.use(taken[0])
	cancel()
	_, err = shared.ReserveSlot(cctx, nil)
	require.ErrorIs(t, err, context.Canceled, "a stopping worker stops waiting")
}

// The slot sequence of a busy 1-slot host under a backlog of starts: a
// delivery releases the host's slot, the shared poller's gate passes in
// the gap, the task's next delivery takes the slot back, then the start
// arrives. Checked where it arrives, the start finds the host held by the
// running task and is handed back, every time; once the task is over (its
// hold lapsed), the next start is admitted.
func TestAStartArrivingAtAFullHostIsHandedBack(t *testing.T) {
	host, err := newHostSlots(1)
	require.NoError(t, err)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	host.now = func() time.Time { return now }
	own, err := worker.NewFixedSizeSlotSupplier(10)
	require.NoError(t, err)
	shared := gatedSlots{SlotSupplier: own, host: host}

	require.True(t, host.admit("task-a"), "an idle host admits the first start")
	host.begin("task-a") // the start itself runs
	host.end("task-a")
	admitted := 0
	slot, err := host.ReserveSlot(context.Background(), nil) // the host poller's
	require.NoError(t, err)
	for range 6 {
		host.begin("task-a") // a delivery of task a holds the host
		host.use(slot)
		now = now.Add(20 * time.Second)
		host.free(slot) // the delivery checkpoints: the gap
		host.end("task-a")
		require.NotNil(t, shared.TryReserveSlot(nil), "the poller's gate passes in the gap")
		now = now.Add(50 * time.Millisecond)
		if host.admit("task-b") { // the start arrives
			admitted++
		}
	}
	require.Zero(t, admitted, "a 1-slot host running task a admits no other start")
	require.True(t, host.admit("task-a"), "the task holding the host may start its next attempt")

	now = now.Add(hostHold + time.Second)
	require.True(t, host.admit("task-b"), "task a over, its hold lapsed: room again")
	require.False(t, host.admit("task-c"), "task b's admission holds the host")
}

// A task's place on the host is held for hostHold at the worker's time
// scale, never shorter than a workflow task's real latency allows.
func TestHostHoldFollowsTheTimeScale(t *testing.T) {
	require.Equal(t, hostHold, hostHoldAt(0))
	require.Equal(t, hostHold, hostHoldAt(1))
	require.Equal(t, hostHold/5, hostHoldAt(5))
	require.Equal(t, minHostHold, hostHoldAt(60))

	_, _, hs, err := tuners(1, 5)
	require.NoError(t, err)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hs.now = func() time.Time { return now }
	require.True(t, hs.admit("A"))
	now = now.Add(hostHold/5 - time.Millisecond)
	require.False(t, hs.admit("B"), "A's place is held")
	now = now.Add(2 * time.Millisecond)
	require.True(t, hs.admit("B"), "A's hold lapsed at the scaled hostHold")
}

func TestFenceEveryFollowsTheTimeScale(t *testing.T) {
	require.Equal(t, time.Minute, fenceEveryAt(0))
	require.Equal(t, time.Second, fenceEveryAt(60))
}
