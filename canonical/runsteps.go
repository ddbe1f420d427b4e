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
//	queued                    idle       state_change  from, to, trigger queued
//	running                   running    state_change  from, to, trigger started, attempt, model
//	blocked                   blocked    state_change  from, to, trigger, reason (what blocks it)
//	paused                    waiting    state_change  from, to, trigger, reason
//	needs-human-rebase        blocked    state_change  from, to, trigger, reason (the conflict)
//	done                      done       task_done     result success
//	skipped                   cancelled  task_done     result skipped
//	failed                    failed     error         error_type task_failed, message (its error)
//	run active / paused       running / waiting  state_change
//	run complete / partial    done       task_done     result success / partial
//
// A budget's note (To "budget") is a message of the run; a state this
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
	var payload any
	switch {
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
		if f, ok := runStates[s.From]; ok {
			from = f.state
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
	runError struct {
		ErrorType string `json:"error_type"`
		Message   string `json:"message"`
		Loops     int    `json:"loops,omitempty"`
	}
)
