// Package stalls holds the rule that says when a phase has stalled: its
// conductor wrote no event and its agent no transcript line for longer
// than a threshold, while the phase's timeout has not yet passed. It also
// names what follows a stall (Action) and checks a threshold against the
// timeout. It does no I/O and knows nothing of Temporal; the delivering
// tail (activities) applies it to what it reads, the task workflow decides
// on the action.
package stalls

import (
	"fmt"
	"time"
)

// Action is what follows a stall.
type Action string

// The actions. Warn only reports the stall (a phase that legitimately
// runs long is never stopped); Redispatch stops the attempt and starts the
// next one, as the redispatch signal does; Abort stops the attempt and
// ends the task aborted.
const (
	Warn       Action = "warn"
	Redispatch Action = "redispatch"
	Abort      Action = "abort"
)

// DefaultAfter is the threshold when neither the dispatch nor the worker
// sets one.
const DefaultAfter = 15 * time.Minute

// MinAfter is the smallest threshold: the tail reads the transcripts every
// tenth of a second, and a threshold of less than a second would take an
// agent's ordinary pauses for stalls.
const MinAfter = time.Second

// ParseAction reads an action; "" is Warn.
func ParseAction(s string) (Action, error) {
	switch Action(s) {
	case "", Warn:
		return Warn, nil
	case Redispatch, Abort:
		return Action(s), nil
	}
	return "", fmt.Errorf("%q: want warn, redispatch or abort", s)
}

// Check says what is wrong with threshold after for a phase timeout of
// timeout (zero when there is none): it must be at least MinAfter and,
// with a timeout, shorter than it, since a phase silent past its timeout
// is the timeout's to end. field names the setting in the error.
func Check(field string, after, timeout time.Duration) error {
	if after < MinAfter {
		return fmt.Errorf("%s: %s is shorter than the least stall threshold of %s", field, after, MinAfter)
	}
	if timeout > 0 && after >= timeout {
		return fmt.Errorf("%s: %s must be shorter than the phase timeout of %s (a phase silent that long times out first)", field, after, timeout)
	}
	return nil
}

// Effective is the threshold that applies to a plan whose timeout is
// timeout (zero: none known): the dispatch's own, else the worker's. Zero:
// no stall is watched for, when the one that applies is off or not shorter
// than the timeout (the timeout comes first; a dispatch's was checked
// against its own timeoutSec, but an operator's template may set a
// shorter one).
func Effective(dispatch, worker, timeout time.Duration) time.Duration {
	after := worker
	if dispatch > 0 {
		after = dispatch
	}
	if after <= 0 || (timeout > 0 && after >= timeout) {
		return 0
	}
	return after
}

// Stalled reports whether a phase whose last sign of progress came at
// progress has stalled at now under threshold after (zero: never).
func Stalled(progress, now time.Time, after time.Duration) bool {
	return after > 0 && !now.Before(progress.Add(after))
}

// Until is how long from now until a phase whose last progress came at
// progress stalls: zero or less when it has already; a very long time when
// after is zero.
func Until(progress, now time.Time, after time.Duration) time.Duration {
	if after <= 0 {
		return time.Duration(1<<63 - 1)
	}
	return progress.Add(after).Sub(now)
}
