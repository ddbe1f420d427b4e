package runview

import (
	"time"

	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/runstatus"
)

// View is a run as its workflow's view query answers it (QueryView):
// what Render draws.
type View struct {
	Slug        string `json:"slug"`
	Title       string `json:"title,omitempty"`
	Concurrency int    `json:"concurrency"`
	// Running counts the task workflows the run has started and not seen
	// end.
	Running int `json:"running"`
	// Status is the status.json document.
	Status runstatus.Status `json:"status"`
	// Tasks are in the run file's order.
	Tasks []TaskView `json:"tasks"`
	// Overlaps names the paths more than one task changed, when the run
	// works in a git repository.
	Overlaps       []Overlap     `json:"overlaps,omitempty"`
	Repo           string        `json:"repo,omitempty"`
	StatusFile     string        `json:"statusFile,omitempty"`
	AbortReason    string        `json:"abortReason,omitempty"`
	SpentUSD       float64       `json:"spentUsd,omitempty"`
	Budget         *costs.Budget `json:"budget,omitempty"`
	BudgetNote     string        `json:"budgetNote,omitempty"`
	ContinuedAsNew int           `json:"continuedAsNew"`
	UpdatedAt      time.Time     `json:"updatedAt,omitzero"`
	// TaskCount is how many tasks the run has. The answer to a page holds,
	// in Tasks and in Status.Tasks, only the page's tasks: from the From-th
	// (from 0, in the run file's order) on.
	TaskCount int `json:"taskCount,omitempty"`
	From      int `json:"from,omitempty"`
}

// TaskView is one task as the view shows it.
type TaskView struct {
	ID      string   `json:"id"`
	Title   string   `json:"title,omitempty"`
	Depends []string `json:"depends,omitempty"`
	// WorkflowID is the task's workflow; Attempt the number of its latest
	// conductor attempt (0 before it started).
	WorkflowID string  `json:"workflowId"`
	Attempt    int     `json:"attempt,omitempty"`
	CostUSD    float64 `json:"costUsd,omitempty"`
	// LastError is the latest attempt's error, also while the task loops.
	LastError string `json:"lastError,omitempty"`
}

// Overlap is a path changed by more than one task.
type Overlap struct {
	Path  string   `json:"path"`
	Tasks []string `json:"tasks"`
}
