package runflow

import (
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/flowkit"
)

// runState is what the run workflow hands over on continue-as-new: the
// status.json document and, per task, what the document does not say.
type runState struct {
	Doc   runstatus.Status    `json:"doc"`
	Tasks map[string]*runTask `json:"tasks"`
	// Repo is set when the run works in a git repository.
	Repo *runRepo `json:"repo,omitempty"`
	// Touched lists, per task, the paths its merged branch changed.
	Touched  map[string][]string `json:"touched,omitempty"`
	Aborting bool                `json:"aborting,omitempty"`
	// Spent adds up the attempts that ended; BudgetLevel is how far the
	// budget has been acted on, BudgetNote what was said.
	Spent       costs.Summary `json:"spent"`
	BudgetLevel costs.Level   `json:"budgetLevel,omitempty"`
	BudgetNote  string        `json:"budgetNote,omitempty"`
	// BudgetAck is what the run had spent when a person ended its pause
	// for a spent budget (or set one still spent): it pauses again only
	// past it.
	BudgetAck   float64 `json:"budgetAck,omitempty"`
	AbortReason string  `json:"abortReason,omitempty"`
	// Changes counts changes to the document, so that it is written once
	// per batch of them.
	Changes int `json:"changes"`
	// Stream is the run's canonical stream; nil until its first write.
	Stream         *RunStreamState `json:"stream,omitempty"`
	ContinuedAsNew int             `json:"continuedAsNew"`
}

// runTask is the run's own record of one task.
type runTask struct {
	// Attempt is the attempt number of the task's latest workflow: every
	// loop, upgrade and retry starts a new one, so each has a fresh plan name.
	Attempt int `json:"attempt,omitempty"`
	// Running: a task workflow of this attempt is out; RunID is its run id
	// once it started (an earlier run of the run workflow waits on it by id).
	Running bool    `json:"running,omitempty"`
	RunID   string  `json:"runId,omitempty"`
	CostUSD float64 `json:"costUsd,omitempty"`
	// Spend is what the running attempt reported spending so far.
	Spend float64 `json:"spend,omitempty"`
	// LastError is the latest attempt's error; Summary what a dependent
	// reads of the task once it is done.
	LastError string `json:"lastError,omitempty"`
	Summary   string `json:"summary,omitempty"`
	// Merge: the task completed and its branch waits to be merged.
	Merge    bool   `json:"merge,omitempty"`
	Worktree string `json:"worktree,omitempty"`
	Branch   string `json:"branch,omitempty"`
}

// runRepo is the run's git repository and the branch its tasks merge into.
type runRepo struct {
	Path          string `json:"path"`
	FeatureBranch string `json:"featureBranch"`
	// Prepared: the feature branch exists; Path is then the repository's
	// resolved path.
	Prepared bool `json:"prepared,omitempty"`
}

// taskEnd is how one attempt of a task ended, as the run learns it from the
// child's result, or from waiting for a child started before continue-as-new.
type taskEnd struct {
	ID      string
	Attempt int
	// Reached is the attempt the task workflow ended on: past Attempt
	// when it was redispatched, or lost a host, inside.
	Reached int
	// Completed: the attempt ended with the task completed.
	Completed bool
	// Early: the task told it before its workflow closed (early_end.go).
	Early bool
	// Final: looping again cannot help (aborted by a person, refused an
	// agent slot by its pool, the workflow failed or was terminated).
	Final   bool
	Error   string
	Summary string
	CostUSD float64
	// ByPhase, Model and Skill break the cost down.
	ByPhase map[string]float64
	Model   string
	Skill   string
}

// endOfResult reads a task workflow's result.
func endOfResult(id string, attempt int, res taskapi.Result) taskEnd {
	te := taskapi.TaskEndedOf(id, attempt, res)
	e := taskEnd{ID: id, Attempt: attempt, Reached: te.Reached, Summary: te.Summary, CostUSD: te.CostUSD,
		ByPhase: te.ByPhase, Model: te.Model, Skill: te.Skill}
	switch res.Outcome.TaskStatus {
	case mapping.TaskCompleted:
		e.Completed = true
	default:
		e.Error = flowkit.FirstNonBlank(res.Outcome.LastError, res.Outcome.BlockerReason, "task ended "+string(res.Outcome.TaskStatus))
		e.Final = mapping.IsAbort(res.Outcome.LastError) || res.Outcome.ErrorType == taskapi.ErrorNoSlot
	}
	return e
}

// endOfFailure is the end of an attempt whose workflow closed without a
// result.
func endOfFailure(id string, attempt int, what string) taskEnd {
	return taskEnd{ID: id, Attempt: attempt, Final: true, Error: what}
}
