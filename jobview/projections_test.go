package jobview

import (
	"slices"
	"testing"

	"karvi-edda-temporal/mapping"
)

// Every event type the runtime knows has an entry in the tally's table, and
// the table has none for a type it does not know: a type added to
// mapping.EventTypes fails here until the tally says how it takes it.
func TestEveryEventTypeHasATallyEntry(t *testing.T) {
	declared := func(typ string) bool { _, ok := tallyObservers[typ]; return ok }
	if missing := mapping.MissingEventTypes(declared); len(missing) > 0 {
		t.Errorf("no entry for %v", missing)
	}
	if got := mapping.MissingEventTypes(declared, append(mapping.EventTypes, "phase_paused")...); !slices.Equal(got, []string{"phase_paused"}) {
		t.Errorf("a type without an entry reads as missing %v", got)
	}
	for typ := range tallyObservers {
		if !slices.Contains(mapping.EventTypes, typ) {
			t.Errorf("entry for %q, which is not in mapping.EventTypes", typ)
		}
	}
}
