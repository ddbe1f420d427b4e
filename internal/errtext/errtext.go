package errtext

import (
	"errors"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// Root is the message a person reads of err: the innermost application
// error's own message when the chain holds one; otherwise the error past
// Temporal's wrappers (an activity's timeout says "activity StartToClose
// timeout", not the activity error around it), whole, so a plain error
// keeps the context its wrapping added.
func Root(err error) string {
	if err == nil {
		return ""
	}
	msg, found := "", false
	for e := err; e != nil; e = errors.Unwrap(e) {
		var app *temporal.ApplicationError
		if errors.As(e, &app) {
			msg, found = app.Message(), true
			e = app
		}
	}
	if found {
		return strings.TrimSpace(msg)
	}
	e := err
	for isWrapper(e) && errors.Unwrap(e) != nil {
		e = errors.Unwrap(e)
	}
	return strings.TrimSpace(e.Error())
}

// isWrapper reports whether e is one of Temporal's errors that only say
// where the error inside them happened.
func isWrapper(e error) bool {
	switch e.(type) {
	case *temporal.ActivityError, *temporal.ChildWorkflowExecutionError, *temporal.WorkflowExecutionError:
		return true
	}
	return false
}
