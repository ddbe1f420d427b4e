package runflow

import (
	"go.temporal.io/sdk/workflow"
)

// The tasks tell their run of their spending, pauses, stalls and early
// ends by signal, and each kind has a listener, a coroutine of its own, so
// that they are taken whatever the loop waits on.
//
// A listener blocked in Receive takes the next signal the moment it is
// delivered, before any coroutine runs; it applies it only once it runs
// itself. The root coroutine runs first in a workflow task, so a root
// that went on to hand over (continue-as-new) would marshal a state
// without the signals delivered with that workflow task, and they would
// be lost. In runs with versionSignalsBuffered, a listener instead waits
// for a signal to be buffered and takes it itself, and the hand-over
// takes what no listener took yet (takeSignals) before it marshals.
//
// Listeners also run while the loop waits for a status write: a change
// they make then is not in that write, and writeStatus leaves it for the
// next one.

// listen makes every signal name brings go to apply, in a listener of its
// own; the signal of runs recorded before versionSignalsBuffered is taken
// by Receive, as then.
func listen[T any](r *runFlow, name string, apply func(T)) {
	ch := workflow.GetSignalChannel(r.ctx, name)
	take := func() bool {
		var v T
		if !ch.ReceiveAsync(&v) {
			return false
		}
		apply(v)
		return true
	}
	r.takers = append(r.takers, take)
	workflow.Go(r.ctx, func(gctx workflow.Context) {
		for {
			if !r.signalsBuffered {
				var v T
				ch.Receive(gctx, &v)
				apply(v)
				continue
			}
			if err := workflow.Await(gctx, func() bool { return ch.Len() > 0 }); err != nil {
				return
			}
			for take() {
			}
		}
	})
}

// takeSignals applies the signals delivered that no listener took yet,
// and says whether there were any.
func (r *runFlow) takeSignals() bool {
	if !r.signalsBuffered {
		return false
	}
	took := false
	for _, take := range r.takers {
		for take() {
			took = true
		}
	}
	return took
}
