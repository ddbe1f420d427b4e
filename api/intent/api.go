package intentapi

import (
	"strings"

	"karvi-edda-temporal/intent"
)

// Names a client uses. They are part of the public interface (the temporal
// CLI and the Web UI show them), so they never change.
const (
	// FireWorkflowName is the workflow each of an intent's schedule's
	// actions starts.
	FireWorkflowName = "IntentFireWorkflow"
	// QueryState answers a running fire's intent.State, what it is doing
	// included.
	QueryState = "state"
	// MemoIntent and MemoFire mark a target's workflow with the intent and
	// the fire that started it: a fire retried after a crash recognizes
	// its own start, and a later fire of the same intent adopts a target
	// an earlier one left running.
	MemoIntent = "karviIntent"
	MemoFire   = "karviIntentFire"
	// scheduleIDPrefix names an intent's schedule; its fires' workflow
	// ids are the schedule id and their time (Temporal appends it).
	scheduleIDPrefix = "karvi-intent-"
)

// ScheduleID is the one Temporal Schedule per intent.
func ScheduleID(name string) string { return scheduleIDPrefix + name }

// NameOf is the intent a schedule id belongs to; ok is false for a
// schedule that is not an intent's.
func NameOf(scheduleID string) (name string, ok bool) {
	return strings.CutPrefix(scheduleID, scheduleIDPrefix)
}

// FireInput is a fire workflow's input, the schedule's action's argument.
// The intent's state does not travel here: Temporal hands each fire the
// result of the previous one.
type FireInput struct {
	Intent intent.Spec `json:"intent"`
}
