package slotact

import (
	"reflect"
	"testing"

	"karvi-edda-temporal/api/slot"
)

// Another wing's workflow calls this activity by the name its API gives;
// the worker registers it under its method's name, so the two must agree.
func TestAPINamesThisWingsActivity(t *testing.T) {
	if _, ok := reflect.TypeOf(&Activities{}).MethodByName(slotapi.ActivityAcquireSlot); !ok {
		t.Fatalf("%s.ActivityAcquireSlot is %q, which no method of Activities is named", "slotapi", slotapi.ActivityAcquireSlot)
	}
}
