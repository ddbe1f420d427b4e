package soak

import (
	"regexp"
	"strconv"
	"time"
)

// Observed is everything the checks judge: what the driver did (Journal),
// what the Sampler saw while the soak ran (Samples, FenceStops), and what
// the system left behind (Tasks, Webhooks, Leftovers). The collectors in
// soak/observe fill it; tests build it by hand.
type Observed struct {
	// Start and End bound the soak (wall time).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Journal is the driver's journal, in order.
	Journal []Record `json:"journal,omitempty"`
	// Tasks is every task the soak started or the intake took, by id.
	Tasks []TaskObs `json:"tasks,omitempty"`
	// Samples is the Sampler's timeline, in time order.
	Samples []Sample `json:"samples,omitempty"`
	// FenceStops are the conductors a worker's fence said it stopped
	// (its log lines), in time order.
	FenceStops []FenceStop `json:"fenceStops,omitempty"`
	// Webhooks are the deliveries the soak's receiver got, in order.
	Webhooks []Webhook `json:"webhooks,omitempty"`
	// Leftovers are the processes found running after the driver stopped
	// everything it started.
	Leftovers []Process `json:"leftovers,omitempty"`
}

// Task returns the observation of a task, nil when there is none.
func (o *Observed) Task(id string) *TaskObs {
	for i := range o.Tasks {
		if o.Tasks[i].ID == id {
			return &o.Tasks[i]
		}
	}
	return nil
}

// TaskObs is what the end state says about one task. A nil part was not
// found (a task of a run has no board entry of its own; a standalone task
// has no status.json entry).
type TaskObs struct {
	ID string `json:"id"`
	// Run is the slug of the run the task belongs to, "" for none.
	Run string `json:"run,omitempty"`
	// Board is the task as the karvi fake holds it.
	Board *BoardTask `json:"board,omitempty"`
	// Brief is the brief as the sink holds it (karvi fake or file sink).
	Brief *Brief `json:"brief,omitempty"`
	// Plans are the task's run directories (runs/<task>/<dir>), by name:
	// one per attempt, and one more per resume after a pause.
	Plans []PlanObs `json:"plans,omitempty"`
	// RunStatus is the task's entry in its run's status.json.
	RunStatus *RunTaskStatus `json:"runStatus,omitempty"`
	// Workflow is the task workflow's last word: its status query, or its
	// result once closed.
	Workflow *WorkflowObs `json:"workflow,omitempty"`
	// Job is the task's job view (the job query).
	Job *JobObs `json:"job,omitempty"`
}

// BoardTask is a task on karvi's board.
type BoardTask struct {
	Status  string `json:"status"`
	Blocker string `json:"blocker,omitempty"`
	// History is the task's status writes, in order.
	History []StatusChange `json:"history,omitempty"`
}

// StatusChange is one accepted status write.
type StatusChange struct {
	At     time.Time `json:"at,omitzero"`
	Status string    `json:"status"`
}

// Brief is the part of a task's brief the checks read.
type Brief struct {
	// PlanName is plan.name: the attempt the brief is about.
	PlanName string `json:"planName,omitempty"`
	// Phases is each phase's status (phases.<id>.status).
	Phases map[string]string `json:"phases,omitempty"`
	// TotalUSD is cost.total_usd (nil when absent); ByPhase cost.by_phase.
	TotalUSD *float64           `json:"totalUsd,omitempty"`
	ByPhase  map[string]float64 `json:"byPhase,omitempty"`
	Log      []LogEntry         `json:"log,omitempty"`
}

// LogEntry is one brief log entry.
type LogEntry struct {
	Time   string `json:"time"`
	Agent  string `json:"agent"`
	Action string `json:"action"`
	Detail string `json:"detail"`
}

// PlanObs is one attempt's conductor files: its events.jsonl and
// state.json (one pair per plan: a resume after a pause goes on in the
// same files), and the run directories of its conductors.
type PlanObs struct {
	// Name is the attempt's plan name.
	Name string `json:"name"`
	// RunDirs are the attempt's run directories (runs/<task>/<dir>): the
	// plan name, then "<plan>-resume-N" for each resume.
	RunDirs []string `json:"runDirs,omitempty"`
	// Events are events.jsonl's well-formed lines, in order; Malformed
	// counts the others.
	Events    []Event `json:"events,omitempty"`
	Malformed int     `json:"malformed,omitempty"`
	// State is state.json, nil when the conductor wrote none.
	State *PlanState `json:"state,omitempty"`
}

// Event is one line of events.jsonl, as much as the checks need.
type Event struct {
	// Line is the 1-based line number, for evidence.
	Line int `json:"line"`
	// Type is the normalised (snake_case) type.
	Type    string   `json:"type"`
	Phase   string   `json:"phase,omitempty"`
	Time    string   `json:"time,omitempty"`
	CostUSD *float64 `json:"costUsd,omitempty"`
}

// PlanState is the part of state.json the checks read.
type PlanState struct {
	Status       string  `json:"status"`
	TotalCostUSD float64 `json:"totalCostUsd"`
}

// RunTaskStatus is a task's entry in its run's status.json.
type RunTaskStatus struct {
	Status  string   `json:"status"`
	CostUSD *float64 `json:"costUsd,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// WorkflowObs is a task workflow chain's state as its queries or its
// result give it.
type WorkflowObs struct {
	// Closed is true once the chain's last workflow closed; CloseStatus is
	// Temporal's word for how (completed, failed, terminated, ...).
	Closed      bool   `json:"closed"`
	CloseStatus string `json:"closeStatus,omitempty"`
	// Closes counts the chain's workflows that closed other than by
	// continue-as-new: more than one means the task ended more than once.
	Closes     int    `json:"closes,omitempty"`
	Stage      string `json:"stage,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	PlanName   string `json:"planName,omitempty"`
	TaskStatus string `json:"taskStatus,omitempty"`
	// Outcome is the outcome's status (completed, blocked, ...) and
	// error.
	Outcome      string           `json:"outcome,omitempty"`
	OutcomeError string           `json:"outcomeError,omitempty"`
	CostUSD      float64          `json:"costUsd,omitempty"`
	Budget       *Budget          `json:"budget,omitempty"`
	Attempts     []AttemptSummary `json:"attempts,omitempty"`
}

// Budget is a task's (or a run's) budget.
type Budget struct {
	LimitUSD float64 `json:"limitUsd"`
	// Action is block, warn or pause.
	Action string `json:"action"`
}

// AttemptSummary is how a finished attempt went.
type AttemptSummary struct {
	Attempt   int       `json:"attempt"`
	PlanName  string    `json:"planName"`
	Ended     string    `json:"ended"`
	LastError string    `json:"lastError,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
	// ConductorLeft: the attempt ended while its conductor's host took no
	// stop, so the conductor may have gone on past what was delivered.
	ConductorLeft bool `json:"conductorLeft,omitempty"`
}

// JobObs is a task's job view (the job query): its steps' costs over the
// attempts it lists.
type JobObs struct {
	// Attempts are the plan names of the attempts the view covers (the
	// attempts of the task's last workflow chain), oldest first.
	Attempts []string `json:"attempts,omitempty"`
	// Steps are the view's step metrics: per phase over those attempts.
	Steps []JobStep `json:"steps,omitempty"`
	// TotalUSD is the view's metrics.cost.total_usd.
	TotalUSD float64 `json:"totalUsd"`
}

// JobStep is one step of the job view: a phase, over the view's attempts.
type JobStep struct {
	Phase   string  `json:"phase"`
	Tries   int     `json:"tries,omitempty"`
	CostUSD float64 `json:"costUsd"`
}

// Sample is one tick of the Sampler: the live conductors it found and what
// each task's workflow said at about the same time.
type Sample struct {
	At         time.Time       `json:"at"`
	Conductors []LiveConductor `json:"conductors,omitempty"`
	Tasks      []TaskSample    `json:"tasks,omitempty"`
}

// LiveConductor is a conductor run whose process group had a running
// member.
type LiveConductor struct {
	// Host is the worker host whose work root holds the run.
	Host string `json:"host,omitempty"`
	Task string `json:"task"`
	// Dir is the run directory's name (plan, or plan-resume-N).
	Dir  string `json:"dir"`
	PGID int    `json:"pgid"`
}

// TaskSample is a task workflow's status at a sample. Open is false once
// the workflow chain closed.
type TaskSample struct {
	Task     string `json:"task"`
	Open     bool   `json:"open"`
	Stage    string `json:"stage,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	PlanName string `json:"planName,omitempty"`
	// Host is the worker host running the attempt's conductor ("" when
	// not known).
	Host string `json:"host,omitempty"`
	// Pause is the pause the status query showed, nil when none.
	Pause *Pause `json:"pause,omitempty"`
	// CostUSD and Budget are the cost query's, for tasks with a budget
	// (HasCost); the status query's cost otherwise.
	CostUSD float64 `json:"costUsd,omitempty"`
	HasCost bool    `json:"hasCost,omitempty"`
	Budget  *Budget `json:"budget,omitempty"`
	// Phase is the phase in flight (the status query's current phase).
	Phase string `json:"phase,omitempty"`
}

// Pause is a task's pause as its status query shows it.
type Pause struct {
	// Reason is "usage_limit" or "budget".
	Reason  string    `json:"reason"`
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until,omitzero"`
	ResetAt time.Time `json:"resetAt,omitzero"`
	Count   int       `json:"count,omitempty"`
	// Account is the agent account for an account's pause, By the task
	// that met the limit ("" for this one).
	Account string `json:"account,omitempty"`
	By      string `json:"by,omitempty"`
	// Budget is the exceeded message of a budget pause.
	Budget string `json:"budget,omitempty"`
}

// Pause reasons.
const (
	PauseUsageLimit = "usage_limit"
	PauseBudget     = "budget"
)

// FenceStop is a worker's log line saying its fence stopped a conductor.
type FenceStop struct {
	At   time.Time `json:"at"`
	Host string    `json:"host,omitempty"`
	Task string    `json:"task"`
	// Plan is the stopped run's directory name.
	Plan string `json:"plan"`
	Why  string `json:"why,omitempty"`
	Line string `json:"line,omitempty"`
}

// Webhook is one delivery the soak's receiver got.
type Webhook struct {
	// At is when the receiver got it.
	At   time.Time `json:"at"`
	ID   string    `json:"id"`
	Kind string    `json:"kind"`
	Task string    `json:"task,omitempty"`
	Run  string    `json:"run,omitempty"`
	// Time is the event's own time field, as sent.
	Time string `json:"time,omitempty"`
	// Digest is a hash of the body: a retried delivery carries the same id
	// and the same body, a repeated id on another event a different body.
	Digest string `json:"digest"`
}

// Process is a process found running when nothing should be.
type Process struct {
	PID  int `json:"pid"`
	PGID int `json:"pgid,omitempty"`
	// What says what it is: conductor, agent, worker, temporal, karvi.
	What string `json:"what"`
	Host string `json:"host,omitempty"`
	Task string `json:"task,omitempty"`
	Dir  string `json:"dir,omitempty"`
	Cmd  string `json:"cmd,omitempty"`
}

var resumeSuffix = regexp.MustCompile(`-resume-([0-9]+)$`)

// AttemptPlan is the plan name of the attempt a run directory belongs to:
// the directory's name without its "-resume-N" suffix.
func AttemptPlan(dir string) string {
	return resumeSuffix.ReplaceAllString(dir, "")
}

// ResumeNumber is N of a "-resume-N" directory, 0 for the attempt's first
// run directory.
func ResumeNumber(dir string) int {
	m := resumeSuffix.FindStringSubmatch(dir)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
