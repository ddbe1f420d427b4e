package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// PlanStatus is edda's plan status (state.json plan_status).
type PlanStatus string

// Plan statuses.
const (
	PlanPending   PlanStatus = "pending"
	PlanRunning   PlanStatus = "running"
	PlanBlocked   PlanStatus = "blocked"
	PlanCompleted PlanStatus = "completed"
	PlanAborted   PlanStatus = "aborted"
)

// edda ErrorType values (state.json phases[].error.error_type).
const (
	ErrAgentCrash     = "agent_crash"
	ErrCheckFailed    = "check_failed"
	ErrTimeout        = "timeout"
	ErrBudgetExceeded = "budget_exceeded"
	ErrUserAbort      = "user_abort"
	// ErrConductorExit is ours: the conductor stopped while its state still
	// said pending or running, with no other explanation.
	ErrConductorExit = "conductor_exit"
	// ErrFenced is ours: the runtime stopped the conductor of its own
	// accord (RuntimeStop).
	ErrFenced = "fenced"
	// ErrNotRun is ours: the attempt was not run at all, the board having
	// cancelled (or deleted) the task before its first status write.
	ErrNotRun = "not_run"
)

// MsgUserAbort is the blocker reason and lastError of an abort.
const MsgUserAbort = "Plan aborted by user"

// TaskStatus is a karvi task.status this project writes.
type TaskStatus string

// The karvi task statuses of a task's life here: dispatched when its plan
// is ready, in_progress once a phase started, then completed or blocked.
const (
	TaskDispatched TaskStatus = "dispatched"
	TaskInProgress TaskStatus = "in_progress"
	TaskCompleted  TaskStatus = "completed"
	TaskBlocked    TaskStatus = "blocked"
)

// DispatchState is karvi's task.dispatch.state (written into
// task.result.dispatch, see docs/contract.md).
type DispatchState string

// Dispatch states.
const (
	DispatchDispatching DispatchState = "dispatching"
	DispatchCompleted   DispatchState = "completed"
	DispatchFailed      DispatchState = "failed"
	// DispatchPaused: the task waits (a usage limit, its budget); its
	// status in karvi stays in_progress.
	DispatchPaused DispatchState = "paused"
)

// ConductorState is the part of state.json the outcome needs. Unknown fields
// are ignored: newer conductors add many.
type ConductorState struct {
	PlanName     string       `json:"plan_name"`
	PlanStatus   PlanStatus   `json:"plan_status"`
	TotalCostUSD float64      `json:"total_cost_usd"`
	Phases       []PhaseState `json:"phases"`
}

// PhaseState is one phase in state.json.
type PhaseState struct {
	ID         string      `json:"id"`
	Status     string      `json:"status"`
	Attempts   int         `json:"attempts"`
	Error      *PhaseError `json:"error,omitempty"`
	SkipReason string      `json:"skip_reason,omitempty"`
}

// PhaseError is edda's ErrorInfo.
type PhaseError struct {
	ErrorType string `json:"error_type"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	Timestamp string `json:"timestamp"`
	// CheckIndex is which of the phase's checks failed (edda writes it for
	// check_failed), so the message can name the check.
	CheckIndex *int `json:"check_index,omitempty"`
}

// ParseConductorState decodes state.json. plan_status is required and
// normalised to lower case.
func ParseConductorState(data []byte) (ConductorState, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return ConductorState{}, errors.New("state.json: empty")
	}
	if trimmed[0] != '{' {
		return ConductorState{}, errors.New("state.json: not a JSON object")
	}
	var cs ConductorState
	if err := json.Unmarshal(trimmed, &cs); err != nil {
		return ConductorState{}, fmt.Errorf("state.json: %w", err)
	}
	cs.PlanStatus = PlanStatus(strings.ToLower(strings.TrimSpace(string(cs.PlanStatus))))
	if cs.PlanStatus == "" {
		return ConductorState{}, errors.New("state.json: plan_status missing")
	}
	for i := range cs.Phases {
		cs.Phases[i].Status = strings.ToLower(cs.Phases[i].Status)
		if e := cs.Phases[i].Error; e != nil {
			e.ErrorType = NormalizeEventType(e.ErrorType)
		}
	}
	return cs, nil
}

// Outcome is what karvi is told when a run ends: task.status,
// task.dispatch.state, lastError and the blocker reason. Code is the
// dispatch's resolution: 0 resolved, 1 rejected.
type Outcome struct {
	PlanStatus    PlanStatus    `json:"planStatus"`
	TaskStatus    TaskStatus    `json:"taskStatus"`
	DispatchState DispatchState `json:"dispatchState"`
	LastError     string        `json:"lastError,omitempty"`
	BlockerReason string        `json:"blockerReason,omitempty"`
	Code          int           `json:"code"`
	ErrorType     string        `json:"errorType,omitempty"`
	PhaseID       string        `json:"phaseId,omitempty"`
}

// TaskStatusFor maps a plan status to karvi's task.status (docs/contract.md
// 7.1); "" for an unknown status.
func TaskStatusFor(ps PlanStatus) TaskStatus {
	switch ps {
	case PlanPending:
		return TaskDispatched
	case PlanRunning:
		return TaskInProgress
	case PlanBlocked, PlanAborted:
		return TaskBlocked
	case PlanCompleted:
		return TaskCompleted
	}
	return ""
}

// DispatchStateFor maps a plan status to karvi's task.dispatch.state (docs/contract.md
// 7.1); "" for an unknown status.
func DispatchStateFor(ps PlanStatus) DispatchState {
	switch ps {
	case PlanPending, PlanRunning:
		return DispatchDispatching
	case PlanCompleted:
		return DispatchCompleted
	case PlanBlocked, PlanAborted:
		return DispatchFailed
	}
	return ""
}

func outcome(ps PlanStatus, errType, phaseID, lastError, blocker string) Outcome {
	o := Outcome{
		PlanStatus:    ps,
		TaskStatus:    TaskStatusFor(ps),
		DispatchState: DispatchStateFor(ps),
		LastError:     lastError,
		BlockerReason: blocker,
		ErrorType:     errType,
		PhaseID:       phaseID,
	}
	if ps != PlanCompleted {
		o.Code = 1
	}
	return o
}

// CompletedOutcome is a finished plan.
func CompletedOutcome() Outcome {
	return outcome(PlanCompleted, "", "", "", "")
}

// AbortedOutcome is a user abort: "Plan aborted by user".
func AbortedOutcome() Outcome {
	return outcome(PlanAborted, ErrUserAbort, "", MsgUserAbort, MsgUserAbort)
}

// MsgStallAbort begins the blocker reason and lastError of a task aborted
// because a phase stalled (the dispatch's onStall abort).
const MsgStallAbort = "Plan aborted on a stall"

// StallAbortedOutcome is a task aborted because phase phaseID showed no
// progress for silent: no event and no agent output.
func StallAbortedOutcome(phaseID string, silent string) Outcome {
	msg := fmt.Sprintf("%s: phase %s showed no progress (no event and no agent output) for %s", MsgStallAbort, phaseID, silent)
	if phaseID == "" {
		msg = fmt.Sprintf("%s: no phase showed progress (no event and no agent output) for %s", MsgStallAbort, silent)
	}
	o := outcome(PlanAborted, ErrUserAbort, phaseID, msg, msg)
	return o
}

// MsgNotRun begins the blocker reason and lastError of an attempt that was
// not run: the board said, at the attempt's first status write, that the
// task was cancelled there or is gone.
const MsgNotRun = "Plan not run"

// NotRunOutcome is an attempt not run, for why (the board's word: "the
// task was cancelled on the board before it started"). It ends as an
// abort does: the plan aborted, the task blocked in the workflow's own
// outcome (karvi keeps its cancel; the sink writes nothing over it).
func NotRunOutcome(why string) Outcome {
	msg := MsgNotRun
	if why != "" {
		msg += ": " + why
	}
	return outcome(PlanAborted, ErrNotRun, "", msg, msg)
}

// IsAbort says whether lastError is an abort's: a person's, one on a
// stall, or an attempt not run because the board cancelled or deleted the
// task first. The task then ended aborted, not blocked by a failure.
func IsAbort(lastError string) bool {
	return lastError == MsgUserAbort || strings.HasPrefix(lastError, MsgStallAbort) || IsNotRun(lastError)
}

// IsNotRun says whether lastError is an attempt not run (NotRunOutcome).
func IsNotRun(lastError string) bool {
	return lastError == MsgNotRun || strings.HasPrefix(lastError, MsgNotRun+":")
}

// TimeoutOutcome is a phase (or, with an empty id, the whole run) that ran
// out of time.
func TimeoutOutcome(phaseID string) Outcome {
	msg := "Plan timed out"
	if phaseID != "" {
		msg = fmt.Sprintf("Phase %s timed out", phaseID)
	}
	return outcome(PlanBlocked, ErrTimeout, phaseID, msg, msg)
}

// CrashOutcome is an agent or conductor that died: "Phase X agent crashed:
// detail (exit code N)"; without a phase id the conductor itself crashed.
func CrashOutcome(phaseID string, exitCode int, detail string) Outcome {
	detail = strings.TrimSpace(detail)
	if exitCode != 0 {
		if detail == "" {
			detail = fmt.Sprintf("exit code %d", exitCode)
		} else {
			detail = fmt.Sprintf("%s (exit code %d)", detail, exitCode)
		}
	}
	if detail == "" {
		detail = "no detail"
	}
	msg := "Conductor crashed: " + detail
	if phaseID != "" {
		msg = fmt.Sprintf("Phase %s agent crashed: %s", phaseID, detail)
	}
	return outcome(PlanBlocked, ErrAgentCrash, phaseID, msg, msg)
}

// UnfinishedOutcome is a conductor that exited normally (code 0) without
// finishing the plan and without a state that says why: not a crash, but the
// task cannot go on. Its signature matches CrashOutcome so callers can pick
// by exit code.
func UnfinishedOutcome(phaseID string, _ int, detail string) Outcome {
	detail = strings.TrimSpace(detail)
	if detail == "" {
		detail = "no detail"
	}
	msg := "Conductor stopped without finishing the plan: " + detail
	return outcome(PlanBlocked, ErrConductorExit, phaseID, msg, msg)
}

// BudgetOutcome is a plan that spent its budget: "Budget exceeded ($X spent
// of $Y)", or "($X spent)" when the budget is unknown.
func BudgetOutcome(spentUSD float64, budgetUSD *float64) Outcome {
	msg := fmt.Sprintf("Budget exceeded ($%.2f spent)", spentUSD)
	if budgetUSD != nil {
		msg = fmt.Sprintf("Budget exceeded ($%.2f spent of $%.2f)", spentUSD, *budgetUSD)
	}
	return outcome(PlanBlocked, ErrBudgetExceeded, "", msg, msg)
}

// PhaseFailedOutcome is a phase that failed for good. For a check failure
// lastError reads "Phase test failed after 3 attempts: check failed: <msg>"
// (the attempts and the error type) and the blocker "Phase test failed:
// <msg>" (example B). Other error types use one wording for both
// (docs/contract.md 7.3).
func PhaseFailedOutcome(ps PlanStatus, phaseID string, attempts int, errType, message string) Outcome {
	msg := StripErrorPrefix(strings.TrimSpace(message))
	switch errType {
	case ErrAgentCrash:
		o := CrashOutcome(phaseID, 0, msg)
		o.PlanStatus, o.TaskStatus, o.DispatchState = ps, TaskStatusFor(ps), DispatchStateFor(ps)
		return o
	case ErrTimeout:
		o := TimeoutOutcome(phaseID)
		o.PlanStatus, o.TaskStatus, o.DispatchState = ps, TaskStatusFor(ps), DispatchStateFor(ps)
		return o
	case ErrUserAbort:
		o := AbortedOutcome()
		o.PlanStatus, o.TaskStatus, o.DispatchState = ps, TaskStatusFor(ps), DispatchStateFor(ps)
		o.PhaseID = phaseID
		return o
	}
	blocker := fmt.Sprintf("Phase %s failed", phaseID)
	if msg != "" {
		blocker += ": " + msg
	}
	last := blocker
	if errType == ErrCheckFailed {
		last = fmt.Sprintf("Phase %s failed after %s", phaseID, plural(max(attempts, 1), "attempt"))
		if msg != "" {
			last += ": check failed: " + msg
		}
	}
	return outcome(ps, errType, phaseID, last, blocker)
}

// OutcomeFromEvent is the outcome a terminal event decides: plan_completed
// completes the task; plan_aborted blocks it. The real conductor writes
// plan_aborted after a phase failed under on_fail: abort (its `conduct
// abort` writes no event), so when the brief shows the failed phase the
// outcome names it; otherwise it is a user abort.
func OutcomeFromEvent(ev Event, st BriefState) (Outcome, bool) {
	if decide := outcomeDeciders[ev.Type]; decide != nil {
		return decide(ev, st), true
	}
	return Outcome{}, false
}

// outcomeDeciders says which of EventTypes decide the attempt's outcome on
// their own; nil: the event decides nothing (the conductor goes on, or its
// exit and state.json will say).
var outcomeDeciders = map[string]func(Event, BriefState) Outcome{
	EventPlanStart:     nil,
	EventPhaseStart:    nil,
	EventPhasePassed:   nil,
	EventPhaseFailed:   nil, // a retry may follow; state.json says when none does
	EventPhaseSkipped:  nil,
	EventPlanCompleted: func(Event, BriefState) Outcome { return CompletedOutcome() },
	EventPlanAborted:   abortedOutcome,
}

func abortedOutcome(_ Event, st BriefState) Outcome {
	if f := st.LastFailure; f != nil && st.Brief.Phases[f.PhaseID].Status == PhaseFailed {
		o := PhaseFailedOutcome(PlanAborted, f.PhaseID, f.Attempt, f.ErrorType, f.Error)
		if f.ErrorType != ErrUserAbort {
			o.LastError = "Plan aborted: " + o.LastError
			o.BlockerReason = "Plan aborted: " + o.BlockerReason
		}
		return o
	}
	return AbortedOutcome()
}

// OutcomeFromState decides the outcome from state.json once the conductor
// has exited without a terminal event (retries exhausted, a stale phase,
// agent budget or crash errors, plan budget exhausted: docs/contract.md 6.3). budgetUSD
// is the plan's budget when known.
func OutcomeFromState(cs ConductorState, st BriefState, budgetUSD *float64) Outcome {
	return outcomeFromState(cs, st, budgetUSD, false)
}

func outcomeFromState(cs ConductorState, st BriefState, budgetUSD *float64, earlierTries bool) Outcome {
	ps := cs.PlanStatus
	if ps == PlanCompleted {
		return CompletedOutcome()
	}
	overBudget := budgetUSD != nil && cs.TotalCostUSD >= *budgetUSD

	if ph, ok := culprit(cs, earlierTries); ok {
		final := ps
		if final != PlanAborted {
			final = PlanBlocked
		}
		errType, message := "", ""
		if ph.Error != nil {
			errType, message = ph.Error.ErrorType, ph.Error.Message
		}
		switch {
		case errType == ErrBudgetExceeded:
			o := BudgetOutcome(cs.TotalCostUSD, budgetUSD)
			o.PlanStatus, o.TaskStatus, o.DispatchState = final, TaskStatusFor(final), DispatchStateFor(final)
			o.PhaseID = ph.ID
			return o
		case ph.Status == PhaseStale && errType == "":
			errType = ErrTimeout
		case errType == "" && st.LastFailure != nil && st.LastFailure.PhaseID == ph.ID:
			errType, message = st.LastFailure.ErrorType, st.LastFailure.Error
		}
		return PhaseFailedOutcome(final, ph.ID, ph.Attempts, errType, message)
	}
	if overBudget {
		o := BudgetOutcome(cs.TotalCostUSD, budgetUSD)
		if ps == PlanAborted {
			o.PlanStatus, o.TaskStatus, o.DispatchState = ps, TaskStatusFor(ps), DispatchStateFor(ps)
		}
		return o
	}
	switch ps {
	case PlanAborted:
		return AbortedOutcome()
	case PlanBlocked:
		msg := "Plan blocked"
		return outcome(PlanBlocked, "", "", msg, msg)
	}
	msg := fmt.Sprintf("Conductor exited before the plan finished (plan status %s)", ps)
	if ps == "" {
		msg = "Conductor exited before the plan finished"
	}
	return outcome(PlanBlocked, ErrConductorExit, "", msg, msg)
}

// culprit is the phase that stopped the plan: the first failed or stale one
// in plan order. edda never clears a phase's error: a phase that passed or
// was skipped after a failed try, one whose next try is running and one
// waiting for it all still carry the failed try's error, so only a failed
// or stale phase's error says why the plan stopped. earlierTries is the
// rule of workflows recorded before that was known, kept for their replay:
// without a failed or stale phase, the first phase carrying any error.
func culprit(cs ConductorState, earlierTries bool) (PhaseState, bool) {
	for _, ph := range cs.Phases {
		if ph.Status == PhaseFailed || ph.Status == PhaseStale {
			return ph, true
		}
	}
	if earlierTries {
		for _, ph := range cs.Phases {
			if ph.Error != nil {
				return ph, true
			}
		}
	}
	return PhaseState{}, false
}

// RuntimeStop records a stop of a conductor that the runtime made of its
// own accord, not its task's workflow (an abort, a timeout, a pause are
// the workflow's, which knows why): the worker's fence stopping a run it
// judged given up, or the start of another attempt of the task stopping
// the runs it finds (docs/fleet.md, "Fencing"). The stopper leaves it in
// the run directory before it signals, so the end of that run is reported
// as this stop rather than as a crash.
type RuntimeStop struct {
	// By is StopBySweep or StopByStart; Host is the worker's host.
	By   string `json:"by"`
	Host string `json:"host,omitempty"`
	// Why is the stopper's reason, for a person.
	Why string `json:"why,omitempty"`
	// At is when, RFC 3339.
	At string `json:"at,omitempty"`
}

// Who stops conductors of their own accord.
const (
	StopBySweep = "sweep"
	StopByStart = "start"
)

// Describe words the stop for a person: "the worker's fence on host h2
// stopped the conductor <where>: <why>"; where may be empty.
func (s RuntimeStop) Describe(where string) string {
	who := "the runtime"
	switch s.By {
	case StopBySweep:
		who = "the worker's fence"
	case StopByStart:
		who = "the start of another attempt"
	}
	if s.Host != "" {
		who += " on host " + s.Host
	}
	msg := who + " stopped the conductor"
	if where != "" {
		msg += " " + where
	}
	if why := strings.TrimSpace(s.Why); why != "" {
		msg += ": " + why
	}
	return msg
}

// FencedOutcome is a conductor the runtime stopped of its own accord:
// "The worker's fence on host h2 stopped the conductor <where>: <why>".
func FencedOutcome(stop RuntimeStop, phaseID, where string) Outcome {
	msg := stop.Describe(where)
	msg = strings.ToUpper(msg[:1]) + msg[1:]
	return outcome(PlanBlocked, ErrFenced, phaseID, msg, msg)
}

// ConductorExit is what is known about a conductor that ended without
// writing a terminal event: its exit status, its state.json (or why it
// could not be read) and the end of what it printed.
type ConductorExit struct {
	// ExitCode is the status its supervisor recorded; -1 when none was (the
	// supervisor died with it), 128+n for death by signal n.
	ExitCode   int
	State      *ConductorState
	StateError string
	// Stderr is the end of the conductor's standard error, redacted: where
	// a conductor says why it stopped.
	Stderr string
	// Output is the end of its standard output without the event lines
	// (with --json the conductor copies every event there), redacted; it
	// only speaks when Stderr says nothing and the conductor was not
	// killed.
	Output string
	// Stopped is the runtime's own stop of the conductor, nil for none:
	// it then explains the end, whatever the conductor left.
	Stopped *RuntimeStop
}

// ExitOutcome reads the end of a run that wrote no terminal event. The
// conductor's state.json is the truth then; edda leaves plan_status
// "running" even when a phase exhausted its retries, so the phases decide.
// A state that explains nothing means the conductor itself died, and its
// exit status and last output are what a person needs. An error edda left
// on a phase from an earlier try (it never clears one) explains nothing:
// the conductor that died while the next phase ran crashed.
func ExitOutcome(x ConductorExit, st BriefState, plan PlanSummary) Outcome {
	return exitOutcome(x, st, plan, false)
}

// ExitOutcomeBlamingEarlierTries is ExitOutcome as task workflows recorded
// before it learnt that edda keeps a phase's error after the phase passed
// decided it: without a failed or stale phase, the first phase carrying
// an error, whatever its status, was blamed. Only for replaying them.
func ExitOutcomeBlamingEarlierTries(x ConductorExit, st BriefState, plan PlanSummary) Outcome {
	return exitOutcome(x, st, plan, true)
}

func exitOutcome(x ConductorExit, st BriefState, plan PlanSummary, earlierTries bool) Outcome {
	phase := st.Brief.CurrentPhase
	where := "before any phase started"
	if phase != "" {
		switch st.Brief.Phases[phase].Status {
		case PhaseFailed:
			where = "after phase " + phase + " failed"
		case PhasePassed, PhaseSkipped:
			where = "after phase " + phase + " ended"
		default:
			where = "while phase " + phase + " was running"
		}
	}
	// A plan that completed before the stop landed stands.
	if x.Stopped != nil && (x.State == nil || x.State.PlanStatus != PlanCompleted) {
		return FencedOutcome(*x.Stopped, phase, where)
	}
	how, code := DescribeExit(x.ExitCode)
	// Exit 0 is a conductor that believed it was done: not a crash.
	ended := CrashOutcome
	if x.ExitCode == 0 {
		ended = UnfinishedOutcome
	}
	if x.State != nil {
		o := outcomeFromState(*x.State, st, plan.BudgetUSD, earlierTries)
		if o.ErrorType != ErrConductorExit {
			return o
		}
		return ended("", code, fmt.Sprintf(
			"conductor %s %s, leaving the plan %s%s", how, where, x.State.PlanStatus, x.note()))
	}
	// Without state.json the event log still tells the story when the last
	// failure used up the phase's attempts: that is "failed after N
	// attempts", whatever happened to the file afterwards.
	if f := st.LastFailure; f != nil && x.ExitCode == 0 &&
		st.Brief.Phases[f.PhaseID].Status == PhaseFailed &&
		plan.MaxAttempts > 0 && f.Attempt >= plan.MaxAttempts {
		errType := f.ErrorType
		if errType == "" {
			errType = ErrCheckFailed
		}
		return PhaseFailedOutcome(PlanBlocked, f.PhaseID, f.Attempt, errType, f.Error)
	}
	return ended("", code, fmt.Sprintf(
		"conductor %s %s and left no readable state.json (%s)%s", how, where, x.StateError, x.note()))
}

// DescribeExit words a conductor's exit status for a person. A status of -1
// means the supervisor recorded none: it was killed together with the
// conductor (SIGKILL to the group, the OOM killer), and "exit code -1" would
// only puzzle. 128+n is the shell's report of death by signal n. It returns
// the exit code still worth printing (0 for none).
func DescribeExit(code int) (string, int) {
	switch {
	case code < 0:
		return "was killed (no exit status was recorded)", 0
	case code > 128 && code < 128+65:
		return fmt.Sprintf("was killed by signal %d", code-128), 0
	}
	return "exited", code
}

// note is what the conductor printed last, labelled with where it came
// from; stderr first, since that is where a program says what went wrong.
// Its other output only speaks for a conductor that ended on its own: one
// killed by a signal said nothing about that, and its progress lines would
// only repeat the brief.
func (x ConductorExit) note() string {
	_, code := DescribeExit(x.ExitCode)
	killed := x.ExitCode != 0 && code == 0
	switch {
	case x.Stderr != "":
		return "; stderr: " + x.Stderr
	case x.Output != "" && !killed:
		return "; last output: " + x.Output
	}
	return ""
}
