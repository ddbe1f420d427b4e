package metrics

import (
	"slices"
	"testing"

	"karvi-edda-temporal/mapping"
)

// Every event type the runtime knows counts under a label of its own in
// karvi_edda_conductor_events_read_total; a type added to
// mapping.EventTypes fails here until knownEvents lists it, instead of
// being counted as "other" unnoticed.
func TestEveryKnownEventTypeHasItsOwnLabel(t *testing.T) {
	listed := func(typ string) bool { return slices.Contains(knownEvents, typ) }
	if missing := mapping.MissingEventTypes(listed); len(missing) > 0 {
		t.Errorf("knownEvents lacks %v: add them, or they are counted as %q", missing, otherEvent)
	}
	// The check bites: a new type is missing until it is listed.
	if got := mapping.MissingEventTypes(listed, append(mapping.EventTypes, "phase_paused")...); !slices.Equal(got, []string{"phase_paused"}) {
		t.Errorf("a type not listed reads as missing %v", got)
	}
}
