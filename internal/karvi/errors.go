package karvi

import (
	"errors"
	"fmt"
	"strings"
)

// Kind classifies a failure so the caller can decide whether to retry.
type Kind string

// The kinds of failure. Only KindTransient and KindConflict are worth
// retrying.
const (
	// KindNoBrief: 404 "no brief for this task": the task has no briefPath
	// or its brief file does not exist yet. Retrying will not create it.
	KindNoBrief Kind = "no_brief"
	// KindIllegalTransition: 400 "Invalid task status transition: X -> Y".
	KindIllegalTransition Kind = "illegal_transition"
	// KindUnauthorized: 401 (bad or missing token) or 403 (role too low).
	KindUnauthorized Kind = "unauthorized"
	// KindNotFound: the task (or route) does not exist.
	KindNotFound Kind = "not_found"
	// KindTransient: connection refused or reset, timeouts, 408, 429, 5xx.
	KindTransient Kind = "transient"
	// KindConflict: karvi's board changed between its read and its write
	// (400 "Version conflict: expected N, got M", or code VERSION_CONFLICT):
	// the write had no effect and is worth sending again.
	KindConflict Kind = "conflict"
	// KindBadRequest: any other 4xx, or a request refused before sending.
	KindBadRequest Kind = "bad_request"
)

// Error is every failure the client returns.
type Error struct {
	// Op names the request, e.g. "PATCH /api/brief/T5".
	Op string
	// Status is the HTTP status, or 0 when no response arrived (or the
	// request was refused before it was sent).
	Status int
	// Message is karvi's error text (the "error" field of its JSON answer),
	// or a description of the transport failure. Never contains the token.
	Message string
	Kind    Kind
	// Err is the underlying transport or context error, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("karvi ")
	b.WriteString(e.Op)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	b.WriteString(" (")
	b.WriteString(string(e.Kind))
	b.WriteString(")")
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind of a client error, or "" for any other error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// IsRetryable reports whether err is a transient karvi failure (connection
// refused, timeout, 408, 429, 5xx) or a version conflict, which a later
// attempt may get past.
func IsRetryable(err error) bool {
	k := KindOf(err)
	return k == KindTransient || k == KindConflict
}

// IsPermanent reports whether err is a karvi failure that retrying cannot
// fix (every kind but Transient and Conflict). Errors that are not *Error
// are neither retryable nor permanent by this package's judgement.
func IsPermanent(err error) bool {
	k := KindOf(err)
	return k != "" && !IsRetryable(err)
}

// IsConflict reports whether karvi refused a write for a version conflict.
func IsConflict(err error) bool { return KindOf(err) == KindConflict }

// IsNoBrief reports whether karvi said the task has no brief.
func IsNoBrief(err error) bool { return KindOf(err) == KindNoBrief }

// IsIllegalTransition reports whether karvi (or the status path planner)
// refused a status transition.
func IsIllegalTransition(err error) bool { return KindOf(err) == KindIllegalTransition }

// IsNotFound reports whether the task does not exist in karvi.
func IsNotFound(err error) bool { return KindOf(err) == KindNotFound }

// IsUnauthorized reports whether karvi refused the token or its role.
func IsUnauthorized(err error) bool { return KindOf(err) == KindUnauthorized }

// noBriefMessage is karvi's exact 404 text for a task without a brief.
const noBriefMessage = "no brief for this task"

// conflictPrefix starts karvi's error text for a write that lost a race
// on the board's version; versionConflictCode is the code some routes
// answer with (503).
const (
	conflictPrefix      = "Version conflict:"
	versionConflictCode = "VERSION_CONFLICT"
)

// transitionPrefix starts karvi's error text for a refused transition.
const transitionPrefix = "Invalid task status transition:"

// classify maps an HTTP status and karvi's error text to a Kind.
func classify(status int, message string) Kind {
	switch {
	case status == 404 && message == noBriefMessage:
		return KindNoBrief
	case status == 404:
		return KindNotFound
	case status == 400 && strings.HasPrefix(message, transitionPrefix):
		return KindIllegalTransition
	case status == 400 && strings.HasPrefix(message, conflictPrefix):
		return KindConflict
	case status == 401 || status == 403:
		return KindUnauthorized
	case status == 408 || status == 425 || status == 429 || status >= 500:
		return KindTransient
	case status >= 400:
		return KindBadRequest
	default:
		// A 1xx/3xx that reached us is a misconfiguration (proxy, redirect
		// refused); retrying will not change it.
		return KindBadRequest
	}
}

// IllegalTransitionError builds the error karvi would answer for from -> to,
// for callers that refuse a transition before asking karvi.
func IllegalTransitionError(op, from, to string) *Error {
	if from == "" {
		from = "pending"
	}
	return &Error{
		Op:      op,
		Kind:    KindIllegalTransition,
		Message: fmt.Sprintf("%s %s -> %s", transitionPrefix, from, to),
	}
}
