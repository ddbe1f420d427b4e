package soak

import "time"

// RecordKind says what a journal record is about. The driver appends a
// record for everything it does to the system and for what it saw that a
// check needs to judge by (a person's resume explains a pause ending
// early; a raised budget explains a budget pause ending).
type RecordKind string

// Record kinds. Details keys each kind uses are listed with it.
const (
	// RecTaskStart: the driver started a standalone task (starter start).
	// Details: "budgetUsd", "budgetAction" when it has a budget,
	// "account" when it shares an agent account.
	RecTaskStart RecordKind = "task-start"
	// RecRunStart: the driver started a run (Run is its slug; Task empty).
	RecRunStart RecordKind = "run-start"
	// RecBoardAdd: the driver put a task on the karvi fake's board for the
	// intake to take.
	RecBoardAdd RecordKind = "board-add"
	// RecResume: a person resumed a paused task (the resume signal).
	RecResume RecordKind = "resume"
	// RecBudgetRaise: a person raised a task's or a run's budget.
	// Details: "limitUsd", "action".
	RecBudgetRaise RecordKind = "budget-raise"
	// RecAbort, RecRedispatch, RecSendBack, RecCancel: a person's action on
	// the task (signal or board). Each may stop a conductor on purpose.
	RecAbort      RecordKind = "abort"
	RecRedispatch RecordKind = "redispatch"
	RecSendBack   RecordKind = "send-back"
	RecCancel     RecordKind = "cancel"
	// RecFault: a fault the mix injects into a task's phase through the
	// simulator. Details: "fault" (crash, stall, usage-limit, fail, ...),
	// "phase".
	RecFault RecordKind = "fault"
	// RecWorkerKill, RecWorkerStart: a worker was SIGKILLed or (re)started.
	// Details: "host", "pid".
	RecWorkerKill  RecordKind = "worker-kill"
	RecWorkerStart RecordKind = "worker-start"
	// RecKarviRestart, RecTemporalRestart: the karvi fake or the Temporal
	// dev server was restarted. Details: "phase" = "down" | "up".
	RecKarviRestart    RecordKind = "karvi-restart"
	RecTemporalRestart RecordKind = "temporal-restart"
	// RecKarviFault: a karvi error injected (Details: "status" 409/429,
	// "count").
	RecKarviFault RecordKind = "karvi-fault"
	// RecTaskEnded: the driver saw a task end (Details: "status").
	RecTaskEnded RecordKind = "task-ended"
	// RecNote: anything else worth keeping in the report.
	RecNote RecordKind = "note"
)

// Record is one line of the soak's journal: what the driver did or saw,
// when, and to what. Records are JSON lines; At is wall time.
type Record struct {
	At      time.Time         `json:"at"`
	Kind    RecordKind        `json:"kind"`
	Task    string            `json:"task,omitempty"`
	Run     string            `json:"run,omitempty"`
	Attempt int               `json:"attempt,omitempty"`
	Details map[string]string `json:"details,omitempty"`
}

// Detail returns a detail's value, "" when absent.
func (r Record) Detail(key string) string { return r.Details[key] }
