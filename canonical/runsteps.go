package canonical

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// RunAgent is the agent id of a run of many tasks in its stream: it reports
// the run's own states and is the parent of every task's agent.
const RunAgent = "run"

// RunIDForRun is the run id of a run's stream: the run's states and every
// change of state of its tasks, in one file beside the tasks' own streams.
// It is named after the run's workflow, so no task's stream shares it.
func RunIDForRun(slug string) string { return "run-karvi-run-" + sanitize(slug, 200) }

// RunStep is one change in a run: of the run itself (Task empty) or of one
// of its tasks, in the run's status.json terms.
type RunStep struct {
	// Seq numbers the run's steps from 1; with the source it is the
	// event's raw_ref.
	Seq int
	TS  time.Time
	// Task is the task's id, empty for the run itself; Title its title.
	Task  string
	Title string
	// From and To are status.json states: a task's (queued, running,
	// blocked, done, failed, skipped, paused, needs-human-rebase) or the
	// run's (active, paused, complete, partial). From is empty for the
	// first.
	From, To string
	// Reason says why: what blocks the task, its error, the conflict, a
	// budget's note, an abort's reason.
	Reason  string
	Model   string
	Attempt int
	Loops   int
	// Prev is the agent's canonical state as last reported ("" when
	// unknown: then From's is taken). It decides which state is true for
	// To, so that the stream keeps to the transition table.
	Prev State
}

// RunTaskState is the canonical state a task's status.json state leaves
// its agent in while the run goes on: a failed task is in error, since a
// person may still retry it (error to running is a retry; failed would
// be terminal). Unknown states give "".
func RunTaskState(status string) State {
	if status == "failed" {
		return StateError
	}
	return runStates[status].state
}

// runStates maps status.json states onto the canonical ones, and says
// which event type reports arriving there.
var runStates = map[string]struct {
	state State
	typ   Type
}{
	"queued":             {StateIdle, TypeStateChange},
	"running":            {StateRunning, TypeStateChange},
	"blocked":            {StateBlocked, TypeStateChange},
	"paused":             {StateWaiting, TypeStateChange},
	"needs-human-rebase": {StateBlocked, TypeStateChange},
	"done":               {StateDone, TypeTaskDone},
	"skipped":            {StateCancelled, TypeTaskDone},
	"failed":             {StateFailed, TypeError},
	"active":             {StateRunning, TypeStateChange},
	"complete":           {StateDone, TypeTaskDone},
	"partial":            {StateDone, TypeTaskDone},
}

// FromRunStep makes the event of one change in a run. A task is agent
// "task-<id>" (role executor), child of agent "run" (role planner). State
// and type follow the task's new state:
//
//	status.json state         state      type          payload
//	queued, first             idle       task_spawn    status, title
//	running                   running    state_change  from, to, trigger started, attempt, model
//	blocked                   blocked    state_change  from, to, trigger, reason (what blocks it)
//	paused                    waiting    state_change  from, to, trigger, reason
//	needs-human-rebase        blocked    state_change  from, to, trigger, reason (the conflict)
//	done                      done       task_done     result success
//	skipped                   cancelled  task_done     result skipped
//	failed                    error      error         error_type task_failed, message (its error)
//	run active / paused       running / waiting  state_change
//	run complete / partial    done       task_done     result success / partial
//
// A status the agent's state (Prev) cannot move to under the transition
// table, or that leaves it in the same state, is a task_update in the
// state it stays in: a task that never ran is still idle when blocked,
// paused or queued again, a failed one still in error when queued again.
// A failed task is in error, never failed, since a retry can run it even
// after the run ended (a run can be reopened). A budget's note (To "budget") is a message of the run; a state this
// table does not know is reported as a message from an agent still at
// work, as an unknown conductor event is.
func FromRunStep(s RunStep, ctx StepContext) Event {
	ev := Event{
		TS:        s.TS.UTC().Truncate(time.Millisecond).Format(tsLayout),
		RunID:     firstNonEmpty(ctx.RunID, "run-unknown"),
		Provider:  ProviderSystem,
		Mode:      ModePipeline,
		AgentID:   RunAgent,
		Role:      RolePlanner,
		IntentRef: prefixed("plan-", ctx.TaskID),
		RawRef:    ctx.Source + "#seq=" + strconv.Itoa(s.Seq),
	}
	if s.Task != "" {
		ev.AgentID = TaskAgent(s.Task)
		ev.ParentAgentID = RunAgent
		ev.Role = RoleExecutor
		ev.TaskID = prefixed("task-", s.Task)
	}
	to, known := runStates[s.To]
	prev := s.Prev
	if prev == "" {
		prev = RunTaskState(s.From)
	}
	var payload any
	switch {
	case s.Task != "" && s.To == "failed":
		// Failed, but a retry may still run it, even after the run ended
		// (a run can be reopened): error, as a retry's failure is.
		ev.State, ev.Type = StateError, TypeError
		payload = runError{ErrorType: "task_failed", Message: firstNonEmpty(s.Reason, "task failed"), Loops: s.Loops}
	case s.Task != "" && s.To == "queued" && prev == StateRunning:
		// Queued again after it ran (a loop: its attempt did not finish
		// it): in error until its next attempt runs, as a retry is.
		ev.State, ev.Type = StateError, TypeTaskUpdate
		payload = runUpdate{Status: s.To, Message: strings.TrimSpace("queued again: " + s.Reason)}
	case s.Task != "" && s.To == "skipped" && prev == StateError:
		// A failed task skipped: its failure stands (error to failed),
		// and the skip is what the result says.
		ev.State, ev.Type = StateFailed, TypeTaskDone
		payload = taskDone{Result: "skipped", Summary: s.Reason, Attempt: s.Attempt}
	case s.Task != "" && known && prev != "" && to.typ == TypeStateChange && (to.state == prev ||
		!Transition(prev, to.state) && (prev == StateIdle || prev == StateError || prev == StateBlocked || prev == StateWaiting)):
		// The status moved but the agent did not: a task that never ran
		// is still idle when a failed dependency blocks it or a pause
		// holds it; a failed task queued again is still in error until it
		// runs. An update says so, in the agent's true state.
		ev.State, ev.Type = prev, TypeTaskUpdate
		payload = runUpdate{Status: s.To, Message: strings.TrimSpace(s.To + ": " + s.Reason)}
	case s.Task != "" && s.To == "queued" && s.Prev == "" && s.From == "":
		// The task's first event: the run spawns it, idle. No change of
		// state: a state_change from idle to idle would be one to nowhere.
		ev.State, ev.Type = StateIdle, TypeTaskSpawn
		payload = runUpdate{Status: "queued", Message: "queued", Title: s.Title}
	case s.To == "budget":
		// A budget's warning or its spending: the run notes it and, for a
		// warn budget, goes on.
		ev.State, ev.Type = StateRunning, TypeMessage
		payload = message{Message: s.Reason, SourceType: "budget"}
	case !known:
		ev.State, ev.Type = StateRunning, TypeMessage
		payload = message{Message: strings.TrimSpace(s.To + " " + s.Reason), SourceType: "run_step"}
	case to.typ == TypeTaskDone:
		ev.State, ev.Type = to.state, to.typ
		result := "success"
		switch s.To {
		case "skipped":
			result = "skipped"
		case "partial":
			result = "partial"
		}
		payload = taskDone{Result: result, Summary: s.Reason, Attempt: s.Attempt}
	case to.typ == TypeError:
		ev.State, ev.Type = to.state, to.typ
		payload = runError{ErrorType: "task_failed", Message: firstNonEmpty(s.Reason, "task failed"), Loops: s.Loops}
	default:
		ev.State, ev.Type = to.state, to.typ
		from := StateIdle
		if prev != "" {
			from = prev
		}
		payload = runChange{From: from, To: to.state, Trigger: firstNonEmpty(s.To, "queued"),
			Reason: s.Reason, Attempt: s.Attempt, Model: s.Model, Title: s.Title}
	}
	ev.Payload, _ = json.Marshal(payload)
	return ev
}

// TaskAgent is the agent id of a run's task in the run's stream.
func TaskAgent(taskID string) string { return "task-" + sanitize(taskID, 59) }

type (
	runChange struct {
		From    State  `json:"from"`
		To      State  `json:"to"`
		Trigger string `json:"trigger,omitempty"`
		Reason  string `json:"reason,omitempty"`
		Attempt int    `json:"attempt,omitempty"`
		Model   string `json:"model,omitempty"`
		Title   string `json:"title,omitempty"`
	}
	runUpdate struct {
		Status  string `json:"status"`
		Message string `json:"message"`
		Title   string `json:"title,omitempty"`
	}
	runError struct {
		ErrorType string `json:"error_type"`
		Message   string `json:"message"`
		Loops     int    `json:"loops,omitempty"`
	}
)
