//go:build realserver

package testrig

import (
	"context"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/slots"
)

// PoolName is a slot pool name of the test's own: pools are shared by
// every task that names them, so tests on one server must not share one.
func (r *Rig) PoolName(what string) string {
	name := r.Queue + "-" + what
	if len(name) > 64 {
		name = strings.TrimLeft(name[len(name)-64:], "-_")
	}
	return name
}

// SetPool sets a pool's limits as `starter slots set` does, starting the
// pool on the rig's queue if it does not run; cleanup terminates it.
func (r *Rig) SetPool(pool string, req slotapi.SetRequest) slotapi.View {
	r.t.Helper()
	v, err := r.TrySetPool(pool, req)
	require.NoError(r.t, err)
	return v
}

// TrySetPool is SetPool returning the pool's refusal.
func (r *Rig) TrySetPool(pool string, req slotapi.SetRequest) (slotapi.View, error) {
	r.Track(slotapi.WorkflowID(pool))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	limits := slots.Limits{MaxConcurrent: req.MaxConcurrent}
	if req.MaxTotal != nil {
		limits.MaxTotal = *req.MaxTotal
	}
	in := slotapi.PoolInput{Pool: pool, Limits: &limits, CheckEvery: req.CheckEvery}
	return slotapi.Pools{Client: r.Client, TaskQueue: r.Queue}.Set(ctx, in, req)
}

// Pool queries a pool's view.
func (r *Rig) Pool(pool string) slotapi.View {
	r.t.Helper()
	return Query[slotapi.View](r, slotapi.WorkflowID(pool), slotapi.QuerySlots)
}

// WaitPool polls a pool's view until cond holds (what names it in the
// failure message), for at most two minutes.
func (r *Rig) WaitPool(pool, what string, cond func(slotapi.View) bool) slotapi.View {
	r.t.Helper()
	return waitFor(r, "pool "+pool, what, func() slotapi.View { return r.Pool(pool) }, cond,
		func(v slotapi.View) any { return v })
}
