package taskact

import (
	"reflect"
	"testing"

	"karvi-edda-temporal/api/task"
)

// Another wing's workflow calls this activity by the name its API gives;
// the worker registers it under its method's name, so the two must agree.
func TestAPINamesThisWingsActivity(t *testing.T) {
	if _, ok := reflect.TypeOf(&Activities{}).MethodByName(taskapi.ActivityNotify); !ok {
		t.Fatalf("%s.ActivityNotify is %q, which no method of Activities is named", "taskapi", taskapi.ActivityNotify)
	}
}
