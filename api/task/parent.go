package taskapi

import (
	"fmt"
	"strings"
	"time"

	"karvi-edda-temporal/mapping"
)

// What a task workflow started by a run tells its parent, as signals to
// the run's workflow: its spend at each checkpoint, a pause, a stall, and
// its completion before its workflow closes. The run wing reads them; the
// task wing sends them. They belong to the task's API so that neither wing
// imports the other's.

// SignalTaskSpend is how a task tells its run what its attempt has spent
// so far, at each checkpoint, when the run has a budget.
const SignalTaskSpend = "task-spend"

// TaskSpend is the payload of SignalTaskSpend.
type TaskSpend struct {
	Task    string  `json:"task"`
	Attempt int     `json:"attempt"`
	CostUSD float64 `json:"costUsd"`
}

// SignalTaskPause is how a task tells its run that it paused (a usage
// limit) or runs again (TaskPause).
const SignalTaskPause = "task-pause"

// TaskPause is the payload of SignalTaskPause.
type TaskPause struct {
	Task    string    `json:"task"`
	Attempt int       `json:"attempt"`
	Paused  bool      `json:"paused"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

// SignalTaskStall is how a task tells its run that a phase stalled (no
// event and no agent output for its threshold) or shows progress again
// (TaskStall).
const SignalTaskStall = "task-stall"

// TaskStall is the payload of SignalTaskStall.
type TaskStall struct {
	Task    string    `json:"task"`
	Attempt int       `json:"attempt"`
	Stalled bool      `json:"stalled"`
	Phase   string    `json:"phase,omitempty"`
	At      time.Time `json:"at"`
}

// SignalTaskEnded is how a task tells its run that its attempt completed,
// as soon as the workflow has the plan's terminal event and before its
// last bookkeeping (the final status write), so the run starts the
// dependents without waiting for the task workflow to close.
const SignalTaskEnded = "task-ended"

// TaskEnded is the payload of SignalTaskEnded: what the run takes from a
// completed task's result.
type TaskEnded struct {
	Task string `json:"task"`
	// Attempt is the attempt the run started; Reached the one the task
	// workflow completed on.
	Attempt int `json:"attempt"`
	Reached int `json:"reached"`
	// Summary is the line the dependents get about the task.
	Summary string             `json:"summary,omitempty"`
	CostUSD float64            `json:"costUsd,omitempty"`
	ByPhase map[string]float64 `json:"byPhase,omitempty"`
	Model   string             `json:"model,omitempty"`
	Skill   string             `json:"skill,omitempty"`
}

// TaskEndedOf is what a task workflow's result tells its run: the payload
// of SignalTaskEnded, and the part of a task's end the run reads from its
// result when the workflow closes.
func TaskEndedOf(id string, attempt int, res Result) TaskEnded {
	e := TaskEnded{Task: id, Attempt: attempt, Reached: max(attempt, res.Attempt), Summary: briefSummary(res.Brief),
		ByPhase: res.Brief.Cost.ByPhase, Skill: res.Dispatch.Skill}
	if m := res.Dispatch.ModelHint; m != nil {
		e.Model = *m
	}
	for _, a := range res.Attempts {
		if a.CostUSD != nil {
			e.CostUSD += *a.CostUSD
		}
	}
	return e
}

// briefSummary is the line a dependent task gets about an upstream one:
// how far its plan went, what it cost, and the last thing it logged.
func briefSummary(b mapping.Brief) string {
	var parts []string
	if b.Plan.TotalPhases > 0 {
		parts = append(parts, fmt.Sprintf("%d/%d phases completed", b.CompletedPhases, b.Plan.TotalPhases))
	}
	if b.Cost.TotalUSD != nil {
		parts = append(parts, fmt.Sprintf("cost $%.2f", *b.Cost.TotalUSD))
	}
	if n := len(b.Log); n > 0 {
		last := b.Log[n-1]
		parts = append(parts, strings.TrimSpace(last.Action+" "+last.Detail))
	}
	return ClipLine(strings.Join(parts, "; "), 300)
}
