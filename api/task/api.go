package taskapi

import (
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/mapping"
)

// Names a client uses to talk to a task workflow. They are part of the
// public interface (the temporal CLI uses them too), so they never change.
const (
	TaskWorkflowName = "TaskWorkflow"
	DefaultTaskQueue = "karvi-edda"
	SignalAbort      = "abort"
	SignalRedispatch = "redispatch"
	// SignalNote adds a note to the task's brief (a run's budget warning).
	SignalNote = "note"
	// SignalResume ends a task's pause early (ResumeSignal).
	SignalResume = "resume"
	// SignalBudget sets the task's budget (BudgetSignal); a task paused
	// for its budget resumes when the new one is not spent.
	SignalBudget = "budget"
	QueryBrief   = "brief"
	QueryStatus  = "status"
	// QueryCost answers what the task spent (Cost).
	QueryCost = "cost"
	// QueryJob answers the task as a job of attempts (jobview.Job).
	QueryJob = "job"
)

// WorkflowID is the one workflow id per karvi task; Temporal refuses a second
// running workflow with the same id, which is what keeps one conductor per task.
func WorkflowID(taskID string) string { return "karvi-task-" + taskID }

// Search attributes shown in the Web UI's workflow list. The dev server of the
// main job registers them; the worker checks they exist at start.
var (
	SearchTaskID       = temporal.NewSearchAttributeKeyKeyword("KarviTaskId")
	SearchPlanName     = temporal.NewSearchAttributeKeyKeyword("EddaPlanName")
	SearchCurrentPhase = temporal.NewSearchAttributeKeyKeyword("EddaCurrentPhase")
	SearchTaskStatus   = temporal.NewSearchAttributeKeyKeyword("KarviTaskStatus")
)

// SearchAttributeNames lists the keyword attributes the workflow upserts.
func SearchAttributeNames() []string {
	return []string{SearchTaskID.GetName(), SearchPlanName.GetName(),
		SearchCurrentPhase.GetName(), SearchTaskStatus.GetName()}
}

// TaskInput starts a task workflow.
type TaskInput struct {
	Dispatch mapping.DispatchPlan `json:"dispatch"`
	// Attempt is the first attempt this workflow makes (default 1). A task
	// redispatched after its workflow closed starts at the previous attempt + 1
	// so that its plan name, and so its conductor state directory, is new.
	Attempt int     `json:"attempt,omitempty"`
	Tuning  *Tuning `json:"tuning,omitempty"`
	// Budget limits what the task may spend over all its attempts; nil for
	// none.
	Budget *costs.Budget `json:"budget,omitempty"`
	// ReportSpend: a task started by a run with a budget tells the run what
	// its attempt has spent at each checkpoint.
	ReportSpend bool `json:"reportSpend,omitempty"`
	// Slots, when set, makes every attempt wait for a slot in an agent
	// slot pool before its conductor starts, and give it back when the
	// attempt ends. Without it the task starts at once, as always.
	Slots *SlotRequest `json:"slots,omitempty"`
	// Account names the agent account the task's conductors use: a usage
	// limit met by any task on the account pauses every task on it, and
	// no new attempt starts on it until the reset. Empty: the slot pool's
	// name when Slots is set, else the task shares no pause.
	Account string `json:"account,omitempty"`
	// Resume is the workflow's whole state, handed over by continue-as-new;
	// empty on a fresh start. A client never sets it. It is kept as JSON
	// here, so that clients do not link the worker's types; the workflow
	// decodes it.
	Resume json.RawMessage `json:"resume,omitempty"`
	// Carry is the state as workflows continued-as-new before the attempt
	// became a value of its own handed it over. It is only read: a run that
	// receives it converts it and goes on.
	Carry json.RawMessage `json:"carry,omitempty"`
}

// DefaultSlotPool is the pool a SlotRequest without a name joins.
const DefaultSlotPool = "agents"

// SlotRequest says which agent slot pool the task's conductors count in.
type SlotRequest struct {
	// Pool names the pool (default DefaultSlotPool): its workflow is
	// karvi-slots-<pool>, shared by every task, run and worker naming it.
	Pool string `json:"pool,omitempty"`
	// Run is the run the task belongs to: the pool's max_total counts the
	// slots granted per run. A run sets it for its tasks.
	Run string `json:"run,omitempty"`
	// Timeout bounds the wait in line; past it the attempt ends blocked.
	// 0 waits as long as it takes.
	Timeout time.Duration `json:"timeout,omitempty"`
	// NoWait ends the attempt blocked at once when every slot is held.
	NoWait bool `json:"noWait,omitempty"`
}

// PoolOrDefault is the pool's name.
func (s *SlotRequest) PoolOrDefault() string {
	if s == nil || s.Pool == "" {
		return DefaultSlotPool
	}
	return s.Pool
}

// Tuning holds knobs that tests and benchmarks turn; zero values mean the
// defaults below.
type Tuning struct {
	// TailWait bounds one delivery that sees no event (default 10 min):
	// a silent agent costs the server only the tail's heartbeats.
	TailWait time.Duration `json:"tailWait,omitempty"`
	// SilenceGrace is added to the plan's timeout_sec before a conductor that
	// has written nothing is declared timed out.
	SilenceGrace time.Duration `json:"silenceGrace,omitempty"`
	// ContinueAsNewAfterPolls continues-as-new after this many polls of the
	// event log in one run, besides Temporal's own suggestion (0 = only the
	// suggestion). Each poll adds a bounded number of history events, so this
	// bounds history deterministically; tests use it to exercise the path.
	ContinueAsNewAfterPolls int `json:"continueAsNewAfterPolls,omitempty"`
	// CheckpointEvery bounds how long the delivering tail runs before it
	// reports its progress to the workflow when it meets no phase boundary
	// (default 10 min; a boundary always ends a delivery): tests set it
	// short to see the workflow learn within a phase.
	CheckpointEvery time.Duration `json:"checkpointEvery,omitempty"`
	// HostGrace is how long an attempt's next activity may wait for the
	// host that runs its conductor to take it (a worker restarting, a
	// machine rebooting) before the host is taken for lost and the attempt
	// given up for a new one on another host (default 5 minutes).
	HostGrace time.Duration `json:"hostGrace,omitempty"`
	// SlotAskEvery is how often an attempt waiting in a slot pool's line
	// asks the pool again (default 5 minutes): a pool that was terminated
	// never sends the notice, and asking again starts a fresh one.
	SlotAskEvery time.Duration `json:"slotAskEvery,omitempty"`
	// PauseMargin is added to a usage limit's reset before the paused task
	// resumes (default 1 minute); PauseWait is the pause when the reset is
	// unknown (default 30 minutes); MaxPauses ends blocked a task whose own
	// agents met a usage limit more than that many times (default 10; its
	// account's pauses and budget pauses are not counted).
	PauseMargin time.Duration `json:"pauseMargin,omitempty"`
	PauseWait   time.Duration `json:"pauseWait,omitempty"`
	MaxPauses   int           `json:"maxPauses,omitempty"`
	// TimeScale divides every default period above, and the workflow's own
	// (a slot's grace, how often a waiting attempt asks its pool, the
	// checkpoint cadence), by itself: at 60 a minute lasts a second. 0 or
	// 1 is real time. A period set above is used as given. A deployment's
	// starter and intake set it from the worker's scale (internal/timescale;
	// docs/timescale.md).
	TimeScale float64 `json:"timeScale,omitempty"`
}

// Scale is the tuning's time scale, of a possibly nil Tuning.
func (t *Tuning) Scale() timescale.Scale {
	if t == nil {
		return timescale.One
	}
	return timescale.Scale(t.TimeScale)
}

// WithScale is t carrying the time scale s: t itself when s changes
// nothing or t already names a scale, else a copy with s set, so that a
// client's tuning is never written to.
func WithScale(t *Tuning, s timescale.Scale) *Tuning {
	if !s.Scaled() || (t != nil && t.TimeScale != 0) {
		return t
	}
	c := Tuning{}
	if t != nil {
		c = *t
	}
	c.TimeScale = float64(s)
	return &c
}

const (
	defaultPauseMargin = time.Minute
	defaultPauseWait   = 30 * time.Minute
	defaultMaxPauses   = 10
)

// PauseMarginOrDefault is PauseMargin, or its default when unset.
func (t *Tuning) PauseMarginOrDefault() time.Duration {
	if t != nil && t.PauseMargin > 0 {
		return t.PauseMargin
	}
	return t.Scale().Of(defaultPauseMargin)
}

// PauseWaitOrDefault is PauseWait, or its default when unset.
func (t *Tuning) PauseWaitOrDefault() time.Duration {
	if t != nil && t.PauseWait > 0 {
		return t.PauseWait
	}
	return t.Scale().Of(defaultPauseWait)
}

// MaxPausesOrDefault is MaxPauses, or its default when unset.
func (t *Tuning) MaxPausesOrDefault() int {
	if t != nil && t.MaxPauses > 0 {
		return t.MaxPauses
	}
	return defaultMaxPauses
}

// ResumeSignal is the payload of the resume signal; every field is
// optional.
type ResumeSignal struct {
	Reason string `json:"reason,omitempty"`
}

// Pause is a task's pause as the status query shows it.
type Pause struct {
	// Reason is PausedUsageLimit.
	Reason string `json:"reason"`
	// Phase is the phase whose agent met the limit.
	Phase string `json:"phase,omitempty"`
	// Since is when the task paused, Until when it resumes by itself,
	// ResetAt the limit's reset as read (zero when unknown).
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	ResetAt time.Time `json:"resetAt,omitzero"`
	// Source names what recognised the limit; Text is its message,
	// secrets masked.
	Source string `json:"source,omitempty"`
	Text   string `json:"text,omitempty"`
	// Count is how many times the task paused, this pause included.
	Count int `json:"count"`
	// Account is the agent account when the pause is the account's: By
	// is then the task whose agent met the limit (empty when it was this
	// one).
	Account string `json:"account,omitempty"`
	By      string `json:"by,omitempty"`
	// Budget is set when the task paused for its budget (PausedBudget):
	// it resumes when the budget is raised or by a resume signal.
	Budget string `json:"budget,omitempty"`
	// Ended is why the pause ended while the task waits for an agent slot
	// to resume with.
	Ended string `json:"ended,omitempty"`
}

// PausedUsageLimit is the reason of a pause for an agent's usage limit.
const PausedUsageLimit = "usage_limit"

// PausedBudget is the reason of a pause for a spent budget whose action
// is pause.
const PausedBudget = "budget"

// BudgetSignal is the payload of SignalBudget: the new limit, and the
// action (empty: keep the budget's).
type BudgetSignal struct {
	LimitUSD float64      `json:"limitUsd"`
	Action   costs.Action `json:"action,omitempty"`
}

const (
	defaultTailWait     = 10 * time.Minute
	defaultSilenceGrace = 30 * time.Second
	defaultHostGrace    = 5 * time.Minute
	defaultSlotAskEvery = 5 * time.Minute
)

// SlotAskEveryOrDefault is SlotAskEvery, or its default when unset.
func (t *Tuning) SlotAskEveryOrDefault() time.Duration {
	if t != nil && t.SlotAskEvery > 0 {
		return t.SlotAskEvery
	}
	return t.Scale().Of(defaultSlotAskEvery)
}

// HostGraceOrDefault is HostGrace, or its default when unset.
func (t *Tuning) HostGraceOrDefault() time.Duration {
	if t != nil && t.HostGrace > 0 {
		return t.HostGrace
	}
	return t.Scale().Of(defaultHostGrace)
}

// TailWaitOrDefault is TailWait, or its default when unset.
func (t *Tuning) TailWaitOrDefault() time.Duration {
	if t != nil && t.TailWait > 0 {
		return t.TailWait
	}
	return t.Scale().Of(defaultTailWait)
}

// SilenceGraceOrDefault is SilenceGrace, or its default when unset. The
// time scale leaves it as it is: it is slack for a real conductor to
// report the end of a phase whose timeout (the plan's) is real time too.
func (t *Tuning) SilenceGraceOrDefault() time.Duration {
	if t != nil && t.SilenceGrace > 0 {
		return t.SilenceGrace
	}
	return defaultSilenceGrace
}

// CheckpointEveryOrZero is CheckpointEvery of a possibly nil Tuning.
func (t *Tuning) CheckpointEveryOrZero() time.Duration {
	if t != nil {
		return t.CheckpointEvery
	}
	return 0
}

// ContinueAsNewAfterPollsOrZero is ContinueAsNewAfterPolls of a possibly
// nil Tuning.
func (t *Tuning) ContinueAsNewAfterPollsOrZero() int {
	if t != nil {
		return t.ContinueAsNewAfterPolls
	}
	return 0
}

// AbortSignal is the payload of the abort signal; every field is optional.
type AbortSignal struct {
	Reason string `json:"reason,omitempty"`
}

// Cost answers the cost query: what the task's attempts spent, by phase,
// model and skill, and where that stands against its budget.
type Cost struct {
	TaskID  string        `json:"taskId"`
	Summary costs.Summary `json:"summary"`
	Budget  *costs.Budget `json:"budget,omitempty"`
	// Level is under, warning or spent; empty without a budget.
	Level string `json:"level,omitempty"`
}

// NoteSignal is the payload of the note signal.
type NoteSignal struct {
	Action string `json:"action"`
	Detail string `json:"detail"`
}

// RedispatchSignal is the payload of the redispatch signal; every field is
// optional.
type RedispatchSignal struct {
	Reason string `json:"reason,omitempty"`
}

// Stage is where an attempt stands. The workflow is a loop over stages, so
// a signal can be honoured between any two steps.
type Stage string

// The stages of an attempt, in order.
const (
	StagePrepare Stage = "prepare" // plan not yet generated
	StageStart   Stage = "start"   // plan on disk, conductor not yet started
	StageRunning Stage = "running" // conductor started, tailing its events
	StageFinish  Stage = "finish"  // outcome known, task status not yet written
	StageDone    Stage = "done"    // the task ended with this attempt
	// StagePaused: the conductor was stopped for a usage limit; the same
	// plan continues at the reset (or on the resume signal).
	StagePaused Stage = "paused"
)

// How an attempt ended (AttemptSummary.Ended).
const (
	EndedCompleted    = "completed"
	EndedBlocked      = "blocked"
	EndedAborted      = "aborted"
	EndedRedispatched = "redispatched"
	// EndedHostLost: the host running the attempt's conductor did not come
	// back within the grace, and the workflow started a new attempt.
	EndedHostLost = "host-lost"
)

// AttemptSummary records how a finished attempt went.
type AttemptSummary struct {
	Attempt  int    `json:"attempt"`
	PlanName string `json:"planName"`
	// Ended is EndedCompleted, EndedBlocked, EndedAborted,
	// EndedRedispatched or EndedHostLost.
	Ended     string    `json:"ended"`
	LastError string    `json:"lastError,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
	// Events counts the conductor events the attempt applied; Phases and
	// CompletedPhases come from its brief.
	Events          int      `json:"events,omitempty"`
	Phases          int      `json:"phases,omitempty"`
	CompletedPhases int      `json:"completedPhases,omitempty"`
	CostUSD         *float64 `json:"costUsd,omitempty"`
	// Job is what the attempt's events said, reduced, and how it ended:
	// the job query's record of it. Attempts that ended before the job
	// view existed know only their end.
	Job *jobview.Tally `json:"job,omitempty"`
	// Host is the host that ran the attempt's conductor, empty when none
	// was named.
	Host string `json:"host,omitempty"`
	// ConductorLeft: the attempt ended (aborted, out of budget, timed
	// out) while its host took no activity within the grace, so its
	// conductor could be neither stopped nor read to its end. It may run
	// on until its host's fence stops it: what the attempt's events and
	// cost say is what was delivered before, and its state.json may say
	// more.
	ConductorLeft bool `json:"conductorLeft,omitempty"`
}

// Status answers the status query.
type Status struct {
	TaskID       string `json:"taskId"`
	Stage        Stage  `json:"stage"`
	Attempt      int    `json:"attempt"`
	PlanName     string `json:"planName,omitempty"`
	CurrentPhase string `json:"currentPhase,omitempty"`
	// PhaseStatus is the current phase's status in the brief.
	PhaseStatus     string `json:"phaseStatus,omitempty"`
	CompletedPhases int    `json:"completedPhases"`
	TotalPhases     int    `json:"totalPhases,omitempty"`
	// CostUSD is what the attempt has cost so far; StartedAt when it began.
	CostUSD         float64            `json:"costUsd,omitempty"`
	StartedAt       time.Time          `json:"startedAt,omitzero"`
	TaskStatus      mapping.TaskStatus `json:"taskStatus,omitempty"`
	Outcome         *mapping.Outcome   `json:"outcome,omitempty"`
	ConductorPID    int                `json:"conductorPid,omitempty"`
	EventsApplied   int                `json:"eventsApplied"`
	PatchesSent     int                `json:"patchesSent"`
	Malformed       int                `json:"malformedLines"`
	LastMalformed   string             `json:"lastMalformed,omitempty"`
	SignalsReceived int                `json:"signalsReceived"`
	SignalsIgnored  int                `json:"signalsIgnored"`
	SinkProblem     string             `json:"sinkProblem,omitempty"`
	ContinuedAsNew  int                `json:"continuedAsNew"`
	Attempts        []AttemptSummary   `json:"attempts,omitempty"`
	// Stream is the run id of the task's canonical event stream (its file
	// is <events dir>/<stream>.jsonl; `starter events` reads it), empty for
	// a workflow that writes none. StreamEvents counts the events stored,
	// StreamWarnings and StreamDropped what validation said of them.
	Stream         string `json:"stream,omitempty"`
	StreamEvents   int    `json:"streamEvents,omitempty"`
	StreamWarnings int    `json:"streamWarnings,omitempty"`
	StreamDropped  int    `json:"streamDropped,omitempty"`

	// Slot is where the attempt stands with its agent slot, when the task
	// asked for one.
	Slot *SlotStatus `json:"slot,omitempty"`
	// Host is the host that runs the attempt's conductor, where its
	// activities go; empty before the attempt started, or when its worker
	// named no host.
	Host string `json:"host,omitempty"`
	// Pause is the task's pause while it is paused; Pauses counts them.
	Pause  *Pause `json:"pause,omitempty"`
	Pauses int    `json:"pauses,omitempty"`
	// Stall is the current phase's stall while it lasts; Stalls counts
	// the task's stalls.
	Stall  *Stall `json:"stall,omitempty"`
	Stalls int    `json:"stalls,omitempty"`
}

// Stall is a phase that shows no progress: no event and no agent
// transcript line for After.
type Stall struct {
	Phase string `json:"phase,omitempty"`
	// Since is the last sign of progress, SeenAt when the stall was seen.
	Since  time.Time     `json:"since"`
	SeenAt time.Time     `json:"seenAt"`
	After  time.Duration `json:"after"`
	// Action is what followed: warn, redispatch or abort.
	Action string `json:"action"`
}

// SlotStatus is an attempt's agent slot as the status query shows it.
type SlotStatus struct {
	Pool string `json:"pool"`
	// State is SlotWaiting, SlotHeld, SlotRefused or SlotReleased.
	State string `json:"state"`
	// Position is the place in line the pool gave when the attempt
	// queued (1 is next); `starter slots` shows the line as it is now.
	Position int `json:"position,omitempty"`
	// Since is when the attempt asked.
	Since time.Time `json:"since,omitzero"`
	// Reason is the pool's refusal: max_concurrent, max_total, timeout.
	Reason string `json:"reason,omitempty"`
}

// Where an attempt stands with its slot (SlotStatus.State).
const (
	SlotWaiting  = "waiting"
	SlotHeld     = "held"
	SlotRefused  = "refused"
	SlotReleased = "released"
)

// Result is what a task workflow returns when the task reaches its end.
type Result struct {
	TaskID   string               `json:"taskId"`
	Attempt  int                  `json:"attempt"`
	PlanName string               `json:"planName"`
	Outcome  mapping.Outcome      `json:"outcome"`
	Brief    mapping.Brief        `json:"brief"`
	Attempts []AttemptSummary     `json:"attempts,omitempty"`
	Dispatch mapping.DispatchPlan `json:"dispatch"`
}

// ErrorNoSlot is the error type of an attempt that got no agent slot.
const ErrorNoSlot = "no_slot"
