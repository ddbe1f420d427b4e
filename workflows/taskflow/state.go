package taskflow

import (
	"time"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/mapping"
)

// State is everything a task workflow knows. It is carried whole across
// continue-as-new, so it must round-trip through JSON.
type State struct {
	Dispatch mapping.DispatchPlan `json:"dispatch"`
	Tuning   *taskapi.Tuning      `json:"tuning,omitempty"`
	// Slots is the agent slot pool each attempt waits for, nil for none.
	Slots *taskapi.SlotRequest `json:"slots,omitempty"`
	// Current is the attempt in progress; once the task ended, its last.
	Current Attempt `json:"current"`
	// Finished summarises every attempt that ended, oldest first (the last
	// one too, once the task ended).
	Finished []taskapi.AttemptSummary `json:"finished,omitempty"`
	// Earlier totals the finished attempts no longer in Finished, which
	// keeps only the latest maxFinished.
	Earlier EarlierAttempts `json:"earlier,omitzero"`
	// TaskStatus is the last status written to the sink.
	TaskStatus mapping.TaskStatus `json:"taskStatus,omitempty"`
	Signals    SignalState        `json:"signals"`
	Counts     Counts             `json:"counts"`
	// SinkProblem is the last refusal from the sink, for the status query.
	SinkProblem    string `json:"sinkProblem,omitempty"`
	ContinuedAsNew int    `json:"continuedAsNew,omitempty"`
	// Polls counts event-log polls in this run (reset by continue-as-new).
	Polls int `json:"polls,omitempty"`
	// Budget is the task's budget and the notes for its brief.
	Budget BudgetState `json:"budget,omitzero"`
	// Stream is the task's canonical event stream (stream.go); nil for a
	// workflow that began before it existed, which writes none.
	Stream *StreamState `json:"stream,omitempty"`
	// Chain is the nonce of this workflow chain's attempts
	// (mapping.AttemptNonce of the workflow id and its first run id); empty
	// for a workflow that began before attempts carried one (identity.go).
	Chain string `json:"chain,omitempty"`
	// Pause is the task's pause while it is paused (pause.go); Pauses
	// counts every pause of the task.
	Pause  *taskapi.Pause `json:"pause,omitempty"`
	Pauses int            `json:"pauses,omitempty"`
	// OwnLimits counts the usage limits the task's own agents met, the
	// pauses Tuning.MaxPauses caps (pause.go).
	OwnLimits int `json:"ownLimits,omitempty"`
	// AccountPause is the account's pause heard while the task waits for
	// its budget: a raised budget then waits for it too (budget.go).
	AccountPause *accountapi.Notice `json:"accountPause,omitempty"`
	// Stalls counts the task's stalls, over its attempts (stall.go).
	Stalls int `json:"stalls,omitempty"`
	// Account is the agent account the task's conductors run on, as the
	// task was started with it (pause_account.go); empty: the slot pool's
	// name, or its worker's account (WorkersAccount), or none.
	Account string `json:"account,omitempty"`
	// WorkersAccount: Account is the worker's, which the claim of the
	// task's first host joined it to (pause_account.go).
	WorkersAccount bool `json:"workersAccount,omitempty"`
	// TailHeartbeat is the heartbeat timeout the delivering tail reported
	// (its worker's -tail-heartbeat), which the next deliveries are
	// scheduled with; zero until one reported it (deliver.go).
	TailHeartbeat time.Duration `json:"tailHeartbeat,omitempty"`
}

// Attempt is one run of the conductor for the task: its own plan (and so
// its own conductor state directory), process, event log and brief.
type Attempt struct {
	N     int           `json:"n"`
	Stage taskapi.Stage `json:"stage"`
	// Nonce is the chain's nonce when the attempt began (State.Chain): with
	// N and the task id it names the attempt's plan (identity.go).
	Nonce string `json:"nonce,omitempty"`
	// Plan is set once the plan is on disk; Conductor once it was started,
	// and cleared when it was stopped.
	Plan      *taskact.PlanInfo        `json:"plan,omitempty"`
	Conductor *taskact.ConductorHandle `json:"conductor,omitempty"`
	// Stopped: the workflow stopped the conductor. Drained: the conductor
	// is gone and its log was delivered to the end.
	Stopped bool `json:"stopped,omitempty"`
	Drained bool `json:"drained,omitempty"`
	// Cursor is how far the event log has been reduced into Brief.
	Cursor taskact.TailCursor `json:"cursor"`
	Brief  mapping.BriefState `json:"brief"`
	// Outcome is set once the attempt's end is known.
	Outcome *mapping.Outcome `json:"outcome,omitempty"`
	// FinalState is the conductor's state.json as the tail read it once the
	// conductor had exited (nil before, or when it was unreadable): the
	// brief's phases are settled against it when the attempt ends.
	FinalState  *mapping.ConductorState `json:"finalState,omitempty"`
	StartedAt   time.Time               `json:"startedAt,omitzero"`
	LastEventAt time.Time               `json:"lastEventAt,omitzero"`
	Events      int                     `json:"events,omitempty"`
	// Job is the attempt's job-view tally as of the last checkpoint (job.go).
	Job *jobview.Tally `json:"job,omitempty"`
	// Slot is the attempt's agent slot, once it asked for one.
	Slot *SlotHold `json:"slot,omitempty"`
	// SinkAhead: the attempt's host was lost while a delivery there may
	// have sent patches past the checkpoint; the settling patch starts from
	// what the sink holds (deliver.go, catchUp).
	SinkAhead bool `json:"sinkAhead,omitempty"`
	// ConductorLeft: the conductor could not be stopped or drained because
	// its host took no activity within the grace (leaveHost).
	ConductorLeft bool `json:"conductorLeft,omitempty"`
	// Host runs the attempt's conductor: its activities go to that host's
	// queue (fleet.go). Empty before the attempt started, or when it was
	// started by a worker without a host.
	Host string `json:"host,omitempty"`
	// Transcripts is how far the agents' transcripts were read for a usage
	// limit; Resumes counts the conductor runs that continued the plan
	// after a pause (pause.go).
	Transcripts taskact.TranscriptCursor `json:"transcripts,omitempty"`
	Resumes     int                      `json:"resumes,omitempty"`
	// ProgressAt is the last sign of progress the tail saw (an event or a
	// transcript line); Stall the stall under way, nil for none (stall.go).
	ProgressAt time.Time      `json:"progressAt,omitzero"`
	Stall      *taskapi.Stall `json:"stall,omitempty"`
	// AccountChecked: the attempt asked its agent account whether it is
	// paused before starting (pause_account.go).
	AccountChecked bool `json:"accountChecked,omitempty"`
	// AccountJoined: the account took the task as a member; it is told
	// when the attempt ends.
	AccountJoined bool `json:"accountJoined,omitempty"`
	// SlotRound counts the slots the attempt gave back during a pause: the
	// next one is asked for under a key of its own.
	SlotRound int `json:"slotRound,omitempty"`
}

// newAttempt is attempt n, about to prepare its plan.
func newAttempt(n int, now time.Time) Attempt {
	return Attempt{N: n, Stage: taskapi.StagePrepare, StartedAt: now, LastEventAt: now}
}

// PlanName is the conductor plan name of the attempt, "" before its plan
// was prepared.
func (a Attempt) PlanName() string {
	if a.Plan == nil {
		return ""
	}
	return a.Plan.Summary.Name
}

// ownSpent is what the attempt spent. An attempt that ended before its
// plan was written spent nothing: the brief it holds is the attempt's
// before, whose spend that attempt's summary counts.
func (a Attempt) ownSpent() float64 {
	if a.Plan == nil {
		return 0
	}
	return spent(a.Brief)
}

// summary records how the attempt ended.
func (a Attempt) summary(ended, lastError string, at time.Time) taskapi.AttemptSummary {
	b := a.Brief.Brief
	s := taskapi.AttemptSummary{
		Attempt: a.N, PlanName: a.PlanName(), Ended: ended, LastError: lastError,
		StartedAt: a.StartedAt, EndedAt: at, Events: a.Events,
		Phases: len(a.Brief.PhaseOrder), CompletedPhases: b.CompletedPhases, Host: a.Host,
		ConductorLeft: a.ConductorLeft,
	}
	// What the attempt cost, also when it did not complete: the plan's
	// total once reported, else the phases' costs.
	if cost := a.ownSpent(); cost > 0 {
		s.CostUSD = &cost
	}
	s.Job = a.endedTally(ended, lastError)
	return s
}

// maxFinished bounds the attempt summaries a task keeps: each one travels
// in every continue-as-new input, the status query and the result.
const maxFinished = 50

// EarlierAttempts totals the finished attempts folded out of Finished.
type EarlierAttempts struct {
	Attempts int     `json:"attempts,omitempty"`
	Events   int     `json:"events,omitempty"`
	CostUSD  float64 `json:"costUsd,omitempty"`
}

// addFinished records an ended attempt, folding the oldest summaries into
// Earlier once more than maxFinished are kept.
func (st *State) addFinished(s taskapi.AttemptSummary) {
	st.Finished = append(st.Finished, s)
	drop := len(st.Finished) - maxFinished
	if drop <= 0 {
		return
	}
	for _, f := range st.Finished[:drop] {
		st.Earlier.Attempts++
		st.Earlier.Events += f.Events
		if f.CostUSD != nil {
			st.Earlier.CostUSD += *f.CostUSD
		}
	}
	st.Finished = append([]taskapi.AttemptSummary(nil), st.Finished[drop:]...)
}

// finishedSpent adds to total what the finished attempts spent, except
// attempt n (the current one, once it ended too). The sum runs in the
// order it always did, so a replayed budget check decides the same.
func (st *State) finishedSpent(total float64, except int) float64 {
	if st.Earlier.CostUSD != 0 {
		total += st.Earlier.CostUSD
	}
	for _, f := range st.Finished {
		if f.CostUSD != nil && f.Attempt != except {
			total += *f.CostUSD
		}
	}
	return total
}

// SignalState holds the signals not yet acted on and the counts.
//
// When abort and redispatch both arrive before the workflow can act (a
// burst), abort wins: stopping is the safe choice, a burst of 100 signals
// still ends in one decision, and at most one conductor per task is ever
// live. Two signal channels keep no order between them, so "last one wins"
// could not be honoured deterministically anyway.
type SignalState struct {
	PendingAbort      bool `json:"pendingAbort,omitempty"`
	PendingRedispatch bool `json:"pendingRedispatch,omitempty"`
	Received          int  `json:"received,omitempty"`
	// Ignored counts signals folded into a decision already pending, and
	// aborts that came when there was nothing left to stop.
	Ignored int `json:"ignored,omitempty"`
}

// Counts are the task's running totals over every attempt.
type Counts struct {
	EventsApplied int `json:"eventsApplied,omitempty"`
	PatchesSent   int `json:"patchesSent,omitempty"`
	Malformed     int `json:"malformed,omitempty"`
	// LastMalformed is the (redacted, shortened) last malformed line.
	LastMalformed string `json:"lastMalformed,omitempty"`
	// Stream* count the events stored in the task's stream, and the
	// warnings and drops of the activities that report them.
	StreamEvents   int `json:"streamEvents,omitempty"`
	StreamWarnings int `json:"streamWarnings,omitempty"`
	StreamDropped  int `json:"streamDropped,omitempty"`
}

// stateV1 is State as workflows carried it across continue-as-new before
// the attempt was a value of its own: one flat record of the task and its
// current attempt. Runs started with it convert it once (upgrade); nothing
// writes it any more.
type stateV1 struct {
	Dispatch          mapping.DispatchPlan     `json:"dispatch"`
	Attempt           int                      `json:"attempt"`
	Stage             taskapi.Stage            `json:"stage"`
	Tuning            *taskapi.Tuning          `json:"tuning,omitempty"`
	Plan              *taskact.PlanInfo        `json:"plan,omitempty"`
	Handle            *taskact.ConductorHandle `json:"handle,omitempty"`
	Cursor            taskact.TailCursor       `json:"cursor"`
	Brief             mapping.BriefState       `json:"brief"`
	TaskStatus        mapping.TaskStatus       `json:"taskStatus,omitempty"`
	LastEventAt       time.Time                `json:"lastEventAt"`
	Outcome           *mapping.Outcome         `json:"outcome,omitempty"`
	PendingAbort      bool                     `json:"pendingAbort,omitempty"`
	PendingRedispatch bool                     `json:"pendingRedispatch,omitempty"`
	Polls             int                      `json:"polls,omitempty"`
	Malformed         int                      `json:"malformed,omitempty"`
	LastMalformed     string                   `json:"lastMalformed,omitempty"`
	EventsApplied     int                      `json:"eventsApplied,omitempty"`
	PatchesSent       int                      `json:"patchesSent,omitempty"`
	SignalsReceived   int                      `json:"signalsReceived,omitempty"`
	SignalsIgnored    int                      `json:"signalsIgnored,omitempty"`
	SinkProblem       string                   `json:"sinkProblem,omitempty"`
	ContinuedAsNew    int                      `json:"continuedAsNew,omitempty"`
	Attempts          []taskapi.AttemptSummary `json:"attempts,omitempty"`
}

// upgrade is the same knowledge in today's shape. The old record did not
// count an attempt's own events nor its start; they stay zero.
func (v stateV1) upgrade() State {
	return State{
		Dispatch: v.Dispatch,
		Tuning:   v.Tuning,
		Current: Attempt{
			N: v.Attempt, Stage: v.Stage, Plan: v.Plan, Conductor: v.Handle,
			Cursor: v.Cursor, Brief: v.Brief, Outcome: v.Outcome, LastEventAt: v.LastEventAt,
		},
		Finished:   v.Attempts,
		TaskStatus: v.TaskStatus,
		Signals: SignalState{
			PendingAbort: v.PendingAbort, PendingRedispatch: v.PendingRedispatch,
			Received: v.SignalsReceived, Ignored: v.SignalsIgnored,
		},
		Counts: Counts{
			EventsApplied: v.EventsApplied, PatchesSent: v.PatchesSent,
			Malformed: v.Malformed, LastMalformed: v.LastMalformed,
		},
		SinkProblem:    v.SinkProblem,
		ContinuedAsNew: v.ContinuedAsNew,
		Polls:          v.Polls,
	}
}
