package main

import (
	"context"
	"testing"

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
