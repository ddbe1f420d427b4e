package jobview

import (
	"fmt"
	"time"
)

// Job is a task as one job: its attempts, where it stands, and what it
// cost. JSON names are snake_case, as the job tool prints them.
type Job struct {
	// ID is the karvi task id.
	ID string `json:"id"`
	// SpecID is the dispatch that asked for the work (its planId); PlanID
	// the conductor plan of the latest attempt.
	SpecID string   `json:"spec_id"`
	PlanID string   `json:"plan_id"`
	State  RunState `json:"state"`
	// MaxAttempts is how many tries each phase gets within an attempt
	// (edda's max_attempts); attempts themselves are redispatches and have
	// no limit.
	MaxAttempts int       `json:"max_attempts"`
	Attempts    []Attempt `json:"attempts"`
	Config      JobConfig `json:"config"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	Metrics     Metrics   `json:"metrics"`
}

// JobConfig is how the job was asked to run.
type JobConfig struct {
	// Optimize is cost, time or balanced; karvi asks for neither, so it is
	// balanced.
	Optimize string `json:"optimize"`
	// PlannerModel is null: plans come from templates, not from a model.
	PlannerModel *string `json:"planner_model"`
	// ExecutorModel is the dispatch's modelHint, null without one.
	ExecutorModel *string `json:"executor_model"`
}

// OptimizeBalanced is the only optimisation a karvi task asks for.
const OptimizeBalanced = "balanced"

// Attempt is one conductor run of the task: the first dispatch or a
// redispatch.
type Attempt struct {
	// ID is the attempt's conductor plan name (unique per attempt).
	ID           string        `json:"id"`
	JobID        string        `json:"job_id"`
	Number       int           `json:"number"`
	WorktreePath string        `json:"worktree_path"`
	Result       AttemptResult `json:"result"`
	StartedAt    time.Time     `json:"started_at"`
	// FinishedAt is null while the attempt runs.
	FinishedAt *time.Time `json:"finished_at"`
	// Verdict is every attempt's verdict, so far for one that runs; the
	// result repeats it when verification failed.
	Verdict Verdict `json:"verdict"`
}

// Verdict is what the attempt's checks said.
type Verdict struct {
	// Passed: the attempt completed its plan, every phase's checks passing
	// in the end (earlier tries may have failed).
	Passed      bool         `json:"passed"`
	TestResults []TestResult `json:"test_results"`
	// Logs are the attempt's failures and skips, one line each.
	Logs []string `json:"logs"`
	// Artifacts are the attempt's run files: event log, state, metrics.
	Artifacts []string `json:"artifacts"`
}

// TestResult is one check of one phase try.
type TestResult struct {
	Name string `json:"name"`
	// Status is passed, failed, skipped (never ran: an earlier check of the
	// try failed, or the phase was skipped) or error (still running when
	// the try ended).
	Status string `json:"status"`
	// DurationMS is the check's own time; 0 when the conductor did not
	// report it.
	DurationMS int64 `json:"duration_ms"`
	// Output is the check's detail or the try's error, clipped; null when
	// there is none.
	Output *string `json:"output"`
}

// Test statuses.
const (
	TestPassed  = "passed"
	TestFailed  = "failed"
	TestSkipped = "skipped"
	TestError   = "error"
)

// Summary is the verdict in one line: "3 passed, 1 failed, 4 total in
// 420ms", the time being the checks' own.
func (v Verdict) Summary() string {
	var passed, failed int
	var ms int64
	for _, r := range v.TestResults {
		switch r.Status {
		case TestPassed:
			passed++
		case TestFailed:
			failed++
		}
		ms += r.DurationMS
	}
	return fmt.Sprintf("%d passed, %d failed, %d total in %dms", passed, failed, len(v.TestResults), ms)
}

// Metrics is what the job (or, in metrics.json, one attempt) took.
type Metrics struct {
	JobID string `json:"job_id"`
	// Attempt is set in an attempt's metrics.json, absent in the job's.
	Attempt   int      `json:"attempt,omitempty"`
	TotalTime Duration `json:"total_time"`
	// TokenUsage is absent when the conductor reported no tokens.
	TokenUsage  []TokenUsage  `json:"token_usage,omitempty"`
	Cost        CostEstimate  `json:"cost"`
	StepMetrics []StepMetrics `json:"step_metrics"`
	// RetryCount counts phase tries beyond each phase's first, plus
	// attempts beyond the first.
	RetryCount int `json:"retry_count"`
}

// Duration is a span as {secs, nanos}, the JSON of a Rust Duration.
type Duration struct {
	Secs  int64 `json:"secs"`
	Nanos int32 `json:"nanos"`
}

// DurationOf converts d, negative spans counting as zero.
func DurationOf(d time.Duration) Duration {
	if d < 0 {
		d = 0
	}
	return Duration{Secs: int64(d / time.Second), Nanos: int32(d % time.Second)}
}

// Std is the span as a time.Duration.
func (d Duration) Std() time.Duration {
	return time.Duration(d.Secs)*time.Second + time.Duration(d.Nanos)
}

// TokenUsage is the tokens one model used.
type TokenUsage struct {
	Model        string `json:"model"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
}

// CostEstimate is what the job cost, in total and by model.
type CostEstimate struct {
	TotalUSD float64            `json:"total_usd"`
	ByModel  map[string]float64 `json:"by_model"`
}

// StepMetrics is one phase, over every try of every attempt it covers.
type StepMetrics struct {
	StepID   string   `json:"step_id"`
	Duration Duration `json:"duration"`
	// Tokens is null when the conductor reported none for the phase.
	Tokens  *TokenUsage `json:"tokens"`
	CostUSD float64     `json:"cost_usd"`
	// Tries counts the phase's runs; 0 for a phase that never ran.
	Tries int `json:"tries"`
}

// UnknownModel names the model of costs and tokens when neither the
// conductor nor the dispatch said which model ran.
const UnknownModel = "unknown"
