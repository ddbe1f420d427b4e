package canonical

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// WorkflowAgent is the agent id of the task workflow: it reports the task's
// own steps (started, each attempt, status changes, signals) and is the
// parent of every attempt's conductor.
const WorkflowAgent = "workflow"

// RunIDForTask is the run id of a board task's stream: one stream per task,
// across its attempts and the workflow runs that carry them, so a reader
// follows one file whatever happens to the task.
func RunIDForTask(taskID string) string { return "run-" + sanitize(taskID, 256) }

// StepSource is the raw_ref source of a workflow's steps: the workflow and
// the run that began its chain of runs, which continue-as-new keeps. A
// later workflow for the same task (a redispatch after the first closed)
// starts a chain of its own, so its steps never collide with the first's.
func StepSource(namespace, workflowID, firstRunID string) string {
	p := (&url.URL{Path: "/" + workflowID + "/" + firstRunID}).EscapedPath()
	return "temporal://" + url.PathEscape(namespace) + "/workflows" + p
}

// StepKind names a step of the task workflow.
type StepKind string

// Steps of the task workflow.
const (
	StepTaskStarted    StepKind = "task_started"
	StepAttemptStarted StepKind = "attempt_started"
	StepTaskStatus     StepKind = "task_status"
	StepSignal         StepKind = "signal"
	StepAttemptEnded   StepKind = "attempt_ended"
	// StepReopened: a task that had completed is given new work (a
	// redispatch); its agent goes from done back to idle.
	StepReopened StepKind = "reopened"
	// StepNote: the bridge noted something on the brief (a budget's
	// warning); Reason is the note, Status its action.
	StepNote StepKind = "note"
	// StepPhasePaused: a phase's agent met a usage limit and the task
	// paused; the phase's agent (Phase) waits for the reset, whatever the
	// conductor made of the limited attempt.
	StepPhasePaused StepKind = "phase_paused"
)

// Step is one thing the task workflow did, in plain values: what
// FromStep needs to make its event.
type Step struct {
	Kind StepKind
	// Seq numbers the steps of one workflow chain from 1; with the source
	// it is the event's raw_ref, and what keeps a step from being stored
	// twice.
	Seq int
	TS  time.Time
	// Prev is the workflow agent's state before this step ("" at its
	// first); a signal or an attempt's end does not change it.
	Prev    State
	Attempt int
	Plan    string
	// Title: the task's first line, for StepTaskStarted.
	Title string
	// Status is the task status of StepTaskStatus (dispatched, completed,
	// blocked, ...), how the attempt ended for StepAttemptEnded.
	Status string
	// Reason: the blocker reason, the signal's reason, the attempt's last
	// error. Aborted marks a block that an abort caused.
	Reason  string
	Aborted bool
	// Signal is the signal's name (abort, redispatch).
	Signal string
	// Phase is the phase of StepPhasePaused.
	Phase string
	// PhasesDone and PhasesTotal give an attempt's progress; CostUSD what
	// it cost, when known.
	PhasesDone, PhasesTotal int
	CostUSD                 *float64
}

// StepContext is the stream a step belongs to.
type StepContext struct {
	RunID  string // RunIDForTask
	TaskID string // the board's task id; "task-" is added
	Source string // StepSource
}

// Task statuses a step reports with a state of its own; any other status
// is an update of a running task.
const (
	statusDispatched = "dispatched"
	statusCompleted  = "completed"
	statusBlocked    = "blocked"
)

// FromStep makes the event of one workflow step. The workflow is agent
// "workflow", role planner (it decides what runs next), parent of each
// attempt's conductor. Its state follows the task: running from the start,
// done when the task completed, blocked when it is blocked (a redispatch
// may resume it: blocked to running is allowed, and a completed task is
// reopened through idle first). A signal or an attempt's end is reported
// in the state the workflow is in.
//
//	step                 state      type          payload
//	task started         running    state_change  from, to, trigger task_started, title, attempt
//	reopened             idle       state_change  from done, to idle, trigger redispatch
//	attempt started      running    task_spawn    title, child_agent (the attempt's conductor), attempt, plan_name
//	status dispatched    running    task_update   progress 0, message, status
//	status completed     done       task_done     result success, summary, status
//	status blocked       blocked    task_done     result failure (cancelled after an abort), summary = reason, status
//	other status         running    task_update   progress, message, status
//	signal redispatch    (as is)    replan        reason, signal
//	signal abort, other  (as is)    message       message, signal, reason
//	attempt ended        (as is)    task_update   progress, message, attempt, plan_name, ended, last_error; cost
//	note (budget, ...)   (as is)    message       message = the note, source_type = its action
//	phase paused         waiting    state_change  the phase's agent: from running, to waiting, trigger usage_limit
func FromStep(s Step, ctx StepContext) Event {
	ev := Event{
		TS:        s.TS.UTC().Truncate(time.Millisecond).Format(tsLayout),
		RunID:     firstNonEmpty(ctx.RunID, "run-unknown"),
		Provider:  ProviderSystem,
		Mode:      ModePipeline,
		AgentID:   WorkflowAgent,
		Role:      RolePlanner,
		TaskID:    prefixed("task-", ctx.TaskID),
		IntentRef: prefixed("plan-", s.Plan),
		RawRef:    ctx.Source + "#seq=" + strconv.Itoa(s.Seq),
	}
	current := s.Prev
	if current == "" {
		current = StateRunning
	}
	var payload any
	switch s.Kind {
	case StepTaskStarted:
		from := s.Prev
		if from == "" {
			from = StateIdle
		}
		ev.State, ev.Type = StateRunning, TypeStateChange
		payload = stepChange{From: from, To: StateRunning, Trigger: string(s.Kind), Title: s.Title, Attempt: s.Attempt}
	case StepReopened:
		ev.State, ev.Type = StateIdle, TypeStateChange
		payload = stepChange{From: firstState(s.Prev, StateDone), To: StateIdle, Trigger: "redispatch", Attempt: s.Attempt}
	case StepAttemptStarted:
		ev.State, ev.Type = StateRunning, TypeTaskSpawn
		payload = spawn{Title: fmt.Sprintf("attempt %d: plan %s", max(s.Attempt, 1), s.Plan),
			ChildAgent: AgentFor(ConductorAgent, s.Attempt), Attempt: max(s.Attempt, 1), PlanName: s.Plan}
	case StepTaskStatus:
		ev.State, ev.Type, payload = statusStep(s)
	case StepSignal:
		ev.State = current
		if s.Signal == "redispatch" {
			ev.Type = TypeReplan
			payload = replan{Reason: firstNonEmpty(s.Reason, "redispatch requested"), Signal: s.Signal}
		} else {
			ev.Type = TypeMessage
			msg := s.Signal + " requested"
			if s.Reason != "" {
				msg += ": " + s.Reason
			}
			payload = signalMessage{Message: msg, Signal: s.Signal, Reason: s.Reason}
		}
	case StepAttemptEnded:
		ev.State, ev.Type = current, TypeTaskUpdate
		payload = stepUpdate{Progress: progress(s), Message: fmt.Sprintf("attempt %d ended: %s", max(s.Attempt, 1), s.Status),
			Attempt: max(s.Attempt, 1), PlanName: s.Plan, Ended: s.Status, LastError: s.Reason}
		if s.CostUSD != nil && *s.CostUSD >= 0 {
			c := *s.CostUSD
			ev.Metrics = &Metrics{CostUSD: &c}
		}
	case StepPhasePaused:
		ev.AgentID = AgentFor(s.Phase, s.Attempt)
		ev.ParentAgentID = AgentFor(ConductorAgent, s.Attempt)
		ev.Role, _ = RoleFor(s.Phase)
		ev.State, ev.Type = StateWaiting, TypeStateChange
		payload = stepChange{From: StateRunning, To: StateWaiting, Trigger: "usage_limit", Attempt: s.Attempt}
	case StepNote:
		ev.State, ev.Type = current, TypeMessage
		payload = message{Message: firstNonEmpty(s.Reason, string(s.Kind)), SourceType: firstNonEmpty(s.Status, string(s.Kind))}
	default:
		ev.State, ev.Type = current, TypeMessage
		payload = message{Message: string(s.Kind), SourceType: string(s.Kind)}
	}
	// The payload types hold only strings, numbers and enums: they always encode.
	ev.Payload, _ = json.Marshal(payload)
	return ev
}

func statusStep(s Step) (State, Type, any) {
	switch s.Status {
	case statusCompleted:
		return StateDone, TypeTaskDone, statusDone{Result: "success", Summary: "task completed", Status: s.Status}
	case statusBlocked:
		result := "failure"
		if s.Aborted {
			result = "cancelled"
		}
		return StateBlocked, TypeTaskDone, statusDone{Result: result,
			Summary: firstNonEmpty(s.Reason, "task blocked"), Status: s.Status}
	}
	p := 0
	if s.Status != statusDispatched {
		p = progress(s)
	}
	return StateRunning, TypeTaskUpdate, stepUpdate{Progress: p, Message: "task " + s.Status, Status: s.Status}
}

// progress is the share of an attempt's phases that are done, 0 to 100.
func progress(s Step) int {
	if s.PhasesTotal <= 0 {
		return 0
	}
	return min(100, max(0, s.PhasesDone*100/s.PhasesTotal))
}

func firstState(s ...State) State {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// Payloads of the workflow's steps: the schema's members for each type,
// plus what a reader of the task wants (status, attempt, plan name).
type (
	stepChange struct {
		From    State  `json:"from"`
		To      State  `json:"to"`
		Trigger string `json:"trigger,omitempty"`
		Title   string `json:"title,omitempty"`
		Attempt int    `json:"attempt,omitempty"`
	}
	spawn struct {
		Title      string `json:"title"`
		ChildAgent string `json:"child_agent"`
		Attempt    int    `json:"attempt"`
		PlanName   string `json:"plan_name,omitempty"`
	}
	stepUpdate struct {
		Progress  int    `json:"progress"`
		Message   string `json:"message,omitempty"`
		Status    string `json:"status,omitempty"`
		Attempt   int    `json:"attempt,omitempty"`
		PlanName  string `json:"plan_name,omitempty"`
		Ended     string `json:"ended,omitempty"`
		LastError string `json:"last_error,omitempty"`
	}
	statusDone struct {
		Result  string `json:"result"`
		Summary string `json:"summary,omitempty"`
		Status  string `json:"status"`
	}
	replan struct {
		Reason string `json:"reason"`
		Signal string `json:"signal"`
	}
	signalMessage struct {
		Message string `json:"message"`
		Signal  string `json:"signal"`
		Reason  string `json:"reason,omitempty"`
	}
)

// TitleOf is the first non-empty line of a task's message, cut to n runes:
// what a step's title shows of the task.
func TitleOf(message string, n int) string {
	first, _, _ := strings.Cut(strings.TrimSpace(message), "\n")
	first = strings.TrimSpace(first)
	if r := []rune(first); len(r) > n {
		return string(r[:n]) + "…"
	}
	return first
}
