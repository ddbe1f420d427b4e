package runstatus

import (
	"time"

	"karvi-edda-temporal/runplan"
)

// RunState is the state of the whole run.
type RunState string

// Run states. A run here goes ready -> active (<-> paused) -> complete or
// partial; draft and approved belong to the planning that precedes a run
// file and are kept so such documents still decode.
const (
	RunDraft    RunState = "draft"
	RunReady    RunState = "ready"
	RunApproved RunState = "approved"
	RunActive   RunState = "active"
	RunPaused   RunState = "paused"
	RunComplete RunState = "complete"
	RunPartial  RunState = "partial"
)

// TaskState is the state of one task.
type TaskState string

// Task states. The reducer moves tasks through queued, blocked, running,
// done, failed, skipped, paused and needs-human-rebase; the others
// (review, revision, planning) are set by whoever owns those steps and
// are kept as written.
const (
	TaskApproved         TaskState = "approved"
	TaskExcluded         TaskState = "excluded"
	TaskQueued           TaskState = "queued"
	TaskBlocked          TaskState = "blocked"
	TaskRunning          TaskState = "running"
	TaskPaused           TaskState = "paused"
	TaskInReview         TaskState = "in-review"
	TaskNeedsRevision    TaskState = "needs-revision"
	TaskDone             TaskState = "done"
	TaskFailed           TaskState = "failed"
	TaskNeedsHumanRebase TaskState = "needs-human-rebase"
	TaskSkipped          TaskState = "skipped"
)

// WorktreeStatus is where a task's worktree is in its life.
type WorktreeStatus string

// Worktree states.
const (
	WorktreeActive         WorktreeStatus = "active"
	WorktreePendingCleanup WorktreeStatus = "pending-cleanup"
	WorktreeCleaned        WorktreeStatus = "cleaned"
)

// ReconciliationStatus is the state of the check made on the feature
// branch once its tasks are merged.
type ReconciliationStatus string

// Reconciliation states.
const (
	ReconciliationPending ReconciliationStatus = "pending"
	ReconciliationPassed  ReconciliationStatus = "passed"
	ReconciliationFailed  ReconciliationStatus = "failed"
)

// PausedReason says why a task is paused.
type PausedReason string

// Pause reasons.
const (
	PausedUsageLimit PausedReason = "usage_limit"
	PausedStall      PausedReason = "stall"
	PausedManual     PausedReason = "manual"
	// PausedBudget: the budget, with the action pause, is spent until a
	// person raises it: a task's own budget pauses the task, a run's
	// budget the run (the run's paused_reason).
	PausedBudget PausedReason = "budget"
)

// Status is the status.json document of a run. Fields that do not apply
// yet are left out of the JSON, so a run that has not started carries only
// its slug, state, creation time and tasks.
//
// Status holds maps: a copy made by assignment shares its tasks. Use Clone
// for an independent copy.
type Status struct {
	PRDSlug              string               `json:"prd_slug"`
	Status               RunState             `json:"status"`
	CreatedAt            time.Time            `json:"created_at,omitzero"`
	StartedAt            time.Time            `json:"started_at,omitzero"`
	CompletedAt          time.Time            `json:"completed_at,omitzero"`
	GitHubProjectURL     string               `json:"github_project_url,omitempty"`
	GitHubProjectNumber  int                  `json:"github_project_number,omitempty"`
	FeatureBranch        string               `json:"feature_branch,omitempty"`
	FeaturePRNumber      int                  `json:"feature_pr_number,omitempty"`
	FeatureMergedAt      time.Time            `json:"feature_merged_at,omitzero"`
	ReconciliationStatus ReconciliationStatus `json:"reconciliation_status,omitempty"`
	// PausedAt and PausedReason: the run paused by itself (PausedBudget:
	// its budget is spent), named as a task's pause is; a person's pause
	// leaves them out.
	PausedAt     time.Time    `json:"paused_at,omitzero"`
	PausedReason PausedReason `json:"paused_reason,omitempty"`
	// Summary is set when the run ends, and only then.
	Summary *Summary `json:"summary,omitempty"`
	// Tasks is keyed by task id; the JSON encoder writes it in key order.
	Tasks map[string]*Task `json:"tasks"`

	// run gives the reducer the task order and the dependencies, which the
	// document itself does not record.
	run runplan.Run
}

// Task is one task's entry in the document.
type Task struct {
	Status      TaskState `json:"status"`
	IssueNumber int       `json:"issue_number,omitempty"`
	PRNumber    int       `json:"pr_number,omitempty"`
	// BlockedBy names the failed tasks that keep a blocked task from
	// starting, in the run's task order.
	BlockedBy         []string       `json:"blocked_by,omitempty"`
	Branch            string         `json:"branch,omitempty"`
	Worktree          string         `json:"worktree,omitempty"`
	WorktreeStatus    WorktreeStatus `json:"worktree_status,omitempty"`
	WorktreeCreatedAt time.Time      `json:"worktree_created_at,omitzero"`
	StartedAt         time.Time      `json:"started_at,omitzero"`
	CompletedAt       time.Time      `json:"completed_at,omitzero"`
	FailedAt          time.Time      `json:"failed_at,omitzero"`
	ConflictAt        time.Time      `json:"conflict_at,omitzero"`
	Error             string         `json:"error,omitempty"`
	ConflictFiles     []string       `json:"conflict_files,omitempty"`
	MergedAt          time.Time      `json:"merged_at,omitzero"`
	Model             string         `json:"model,omitempty"`
	// LoopCount is how many conductor attempts the task has made on its
	// current model since it was last queued afresh: an upgrade and a retry
	// start it again from zero.
	LoopCount int `json:"loop_count,omitempty"`
	// ModelUpgrades counts this task's moves from sonnet to opus (0 or 1);
	// the summary's model_upgrades is their sum.
	ModelUpgrades int          `json:"model_upgrades,omitempty"`
	RevisionCount int          `json:"revision_count,omitempty"`
	PausedAt      time.Time    `json:"paused_at,omitzero"`
	PausedReason  PausedReason `json:"paused_reason,omitempty"`
	// StalledAt and StalledPhase: a running task's phase shows no progress
	// (no event and no agent output for its stall threshold) since
	// StalledAt; the task goes on unless its stall action stops it.
	StalledAt    time.Time `json:"stalled_at,omitzero"`
	StalledPhase string    `json:"stalled_phase,omitempty"`
}

// Summary is written when the run ends.
type Summary struct {
	TotalTasks int `json:"total_tasks"`
	Successful int `json:"successful"`
	Failed     int `json:"failed"`
	Skipped    int `json:"skipped,omitempty"`
	// TotalLoops is the sum of the tasks' loop_count: attempts made before
	// an upgrade or a retry reset a task's count are not in it.
	TotalLoops      int `json:"total_loops"`
	ModelUpgrades   int `json:"model_upgrades"`
	DurationMinutes int `json:"duration_minutes"`
	// RuntimeDependenciesDiscovered is kept as written; nothing here
	// discovers dependencies while a run goes.
	RuntimeDependenciesDiscovered int `json:"runtime_dependencies_discovered,omitempty"`
}
