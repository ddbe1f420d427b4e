package runact

import (
	"context"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/eventstream"
	"karvi-edda-temporal/traces"
)

// traceRun exports the run's span (docs/traces.md) when the steps just
// stored end the run: it is made from the run's stream, so a retried
// write, or the same write by another worker, makes the same span, and
// the emitter's ledger sends it once. A failure costs the span, never the
// write: it is logged.
func (a *Activities) traceRun(ctx context.Context, st *eventstream.Store, slug string, steps []canonical.Event) {
	if a.Traces == nil || !runEnds(steps) {
		return
	}
	runID := canonical.RunIDForRun(slug)
	var evs []canonical.Event
	for from := int64(0); ; {
		p, err := st.Read(ctx, runID, from, eventstream.ReadOptions{MaxBytes: 1 << 20})
		if err != nil {
			activities.Logger(ctx).Warn("run span not made: its stream was not read", "run", slug, "error", err)
			return
		}
		if len(p.Lines) == 0 {
			break
		}
		for _, l := range p.Lines {
			if ev, err := canonical.Parse([]byte(l)); err == nil {
				evs = append(evs, ev)
			}
		}
		from = p.Next
	}
	if _, err := a.Traces.Emit(ctx, runID, traces.RunSpans(slug, evs)); err != nil {
		activities.Logger(ctx).Warn("run span not exported", "run", slug, "error", err)
	}
}

func runEnds(steps []canonical.Event) bool {
	for _, ev := range steps {
		if ev.AgentID == canonical.RunAgent && ev.Type == canonical.TypeTaskDone {
			return true
		}
	}
	return false
}
