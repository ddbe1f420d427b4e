package mapping

import (
	"reflect"
	"slices"
	"testing"
)

// Every event type this runtime knows has an entry in the brief's and the
// outcome's tables; a type added to EventTypes fails here until both say
// how they take it.
func TestEveryEventTypeHasABriefReducerAndAnOutcomeRule(t *testing.T) {
	for name, declared := range map[string]func(string) bool{
		"brief":   func(typ string) bool { _, ok := briefReducers[typ]; return ok },
		"outcome": func(typ string) bool { _, ok := outcomeDeciders[typ]; return ok },
	} {
		if missing := MissingEventTypes(declared); len(missing) > 0 {
			t.Errorf("%s: no entry for %v", name, missing)
		}
		// The check bites: a new type is missing until it gets an entry.
		if got := MissingEventTypes(declared, append(EventTypes, "phase_paused")...); !reflect.DeepEqual(got, []string{"phase_paused"}) {
			t.Errorf("%s: a type without an entry reads as missing %v", name, got)
		}
	}
	// And no table holds a type the runtime no longer knows.
	for name, keys := range map[string][]string{"brief": keysOf(briefReducers), "outcome": keysOf(outcomeDeciders)} {
		for _, typ := range keys {
			if !slices.Contains(EventTypes, typ) {
				t.Errorf("%s: entry for %q, which is not in EventTypes", name, typ)
			}
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
