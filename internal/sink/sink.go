package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"karvi-edda-temporal/internal/karvi"
)

// StatusUpdate is one task status change and the dispatch state that goes
// with it (docs/contract.md §7).
type StatusUpdate struct {
	// Status is the karvi task status to reach: in_progress, completed,
	// blocked or dispatched (any karvi status is accepted).
	Status string
	// Reason becomes task.blocker.reason when Status is blocked; for
	// another status it is the summary of the result a pause or resume
	// writes.
	Reason string
	// DispatchState is dispatch.state: dispatching, completed or failed;
	// empty leaves the dispatch record alone.
	DispatchState string
	// LastError is dispatch.lastError (empty = none).
	LastError string
	// PlanID is the DispatchPlan's planId; PlanName the edda plan name.
	PlanID, PlanName string
	// AskedAt is the blocker's time (RFC 3339), from the caller: workflow
	// time, so a replayed or retried activity writes the same value.
	AskedAt string
}

// Sink receives a task's brief PATCHes and status changes. Both writes are
// safe to retry: a repeated PATCH merges to the same brief, and a status the
// task already has is a no-op.
type Sink interface {
	PatchBrief(ctx context.Context, taskID string, body json.RawMessage) error
	SetStatus(ctx context.Context, taskID string, u StatusUpdate) error
	// CurrentBrief is the brief as the sink holds it, decoded; nil when the
	// sink has none for the task. Delivery reads it after a crash to learn
	// which patches already arrived.
	CurrentBrief(ctx context.Context, taskID string) (map[string]any, error)
}

var (
	_ Sink = (*File)(nil)
	_ Sink = (*Karvi)(nil)
)

// taskIDPattern keeps task ids to names that cannot escape the file sink's
// directory and that karvi's brief routes accept.
var taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func badRequest(op, format string, args ...any) *karvi.Error {
	return &karvi.Error{Op: op, Kind: karvi.KindBadRequest, Message: fmt.Sprintf(format, args...)}
}

func checkTaskID(op, id string) error {
	if !taskIDPattern.MatchString(id) {
		return badRequest(op, "task id %q must match [A-Za-z0-9_-]{1,64}", id)
	}
	return nil
}

func checkUpdate(op string, u StatusUpdate) error {
	if !karvi.ValidStatus(u.Status) {
		return badRequest(op, "status %q is not a karvi task status", u.Status)
	}
	return nil
}

// writesResult reports whether u's dispatch state is written as the task's
// result: an ending, a pause, or a resume (dispatching with a reason).
func writesResult(u StatusUpdate) bool {
	return terminalDispatch(u.DispatchState) || u.DispatchState == "paused" ||
		(u.DispatchState == "dispatching" && u.Reason != "")
}

// terminalDispatch reports whether a dispatch state ends the dispatch.
func terminalDispatch(state string) bool {
	return state == "completed" || state == "failed"
}

// Congestion is implemented by a sink that can tell when a brief write
// would wait for its turn (karvi's rate limit); wrappers pass it on.
type Congestion interface {
	Congested() bool
}

// Congested reports whether s says its brief writes now wait for their
// turn; false for a sink that cannot tell.
func Congested(s Sink) bool {
	c, ok := s.(Congestion)
	return ok && c.Congested()
}

// Replacer is implemented by a sink that can replace a task's brief whole
// in one write (karvi's PUT), with no need to read it first to wipe what
// an earlier brief set; wrappers pass it on.
type Replacer interface {
	// CanReplace reports whether ReplaceBrief works (a wrapper asks the
	// sink it wraps).
	CanReplace() bool
	ReplaceBrief(ctx context.Context, taskID string, body json.RawMessage) error
}

// CanReplace reports whether s can replace a brief whole (Replacer).
func CanReplace(s Sink) bool {
	r, ok := s.(Replacer)
	return ok && r.CanReplace()
}

// ReplaceBrief replaces the task's brief with body; a sink that cannot
// (CanReplace false) fails with a bad request and sends nothing.
func ReplaceBrief(ctx context.Context, s Sink, taskID string, body json.RawMessage) error {
	if !CanReplace(s) {
		return badRequest("replace brief of "+taskID, "the sink cannot replace a brief whole")
	}
	return s.(Replacer).ReplaceBrief(ctx, taskID, body)
}

// Attendance is implemented by a sink that shares a limited budget of
// writes between tasks (karvi's rate limit): it counts the tasks running,
// so that it says it is congested sooner when many run at once; wrappers
// pass it on.
type Attendance interface {
	// Attend counts one task as running until done is called.
	Attend() (done func())
}

// Attend counts a task as running at s until done is called; a no-op for
// a sink that does not count (Attendance).
func Attend(s Sink) (done func()) {
	if a, ok := s.(Attendance); ok {
		return a.Attend()
	}
	return func() {}
}
