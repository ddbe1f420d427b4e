package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"karvi-edda-temporal/mapping"
)

// Task statuses karvi writes (its transition table is in docs/intake.md).
const (
	StatusPending       = "pending"
	StatusDispatched    = "dispatched"
	StatusInProgress    = "in_progress"
	StatusBlocked       = "blocked"
	StatusCompleted     = "completed"
	StatusReviewing     = "reviewing"
	StatusNeedsRevision = "needs_revision"
	StatusApproved      = "approved"
	StatusCancelled     = "cancelled"
)

// Project statuses karvi writes.
const (
	ProjectExecuting = "executing"
	ProjectPaused    = "paused"
	ProjectDone      = "done"
)

// Board is karvi's board as the intake reads it: the whole board.json that
// GET /api/tasks answers and every `board` event of the feed carries.
// Fields the intake does not use are ignored.
type Board struct {
	// Version is karvi's _version: it counts writes, so a snapshot with a
	// lower one is older than one already seen.
	Version      int64         `json:"_version"`
	TaskPlan     TaskPlan      `json:"taskPlan"`
	Controls     Controls      `json:"controls"`
	Participants []Participant `json:"participants"`
	Projects     []Project     `json:"projects"`
}

// TaskPlan is the board's task list with the board-wide goal.
type TaskPlan struct {
	Goal  string `json:"goal"`
	Tasks []Task `json:"-"`
}

// Task is one board task. A task whose fields do not decode is kept with
// DecodeErr set, so the rest of the board still reads and the problem can be
// reported against that task.
type Task struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Spec        string   `json:"spec"`
	Status      string   `json:"status"`
	Assignee    string   `json:"assignee"`
	Depends     []string `json:"depends"`
	RuntimeHint string   `json:"runtimeHint"`
	ModelHint   string   `json:"modelHint"`
	Skill       string   `json:"skill"`
	ProjectID   string   `json:"projectId"`
	TargetRepo  string   `json:"target_repo"`
	// Estimate and Scope are carried as written into a run file.
	Estimate  json.RawMessage `json:"estimate"`
	Scope     json.RawMessage `json:"scope"`
	LastReply string          `json:"lastReply"`
	Result    *TaskResult     `json:"result"`
	Steps     []TaskStep      `json:"steps"`
	History   []HistoryEntry  `json:"history"`

	// DecodeErr is the first field that did not decode, "" when all did.
	DecodeErr string `json:"-"`
}

// TaskResult is what a finished task reported.
type TaskResult struct {
	Summary string          `json:"summary"`
	Payload json.RawMessage `json:"payload"`
}

// TaskStep is one step of karvi's own pipeline; only a succeeded step's
// output reference reaches a dependent task.
type TaskStep struct {
	State     string `json:"state"`
	OutputRef string `json:"output_ref"`
}

// HistoryEntry is one line of a task's history: karvi appends one on every
// status write.
type HistoryEntry struct {
	Status string `json:"status"`
	From   string `json:"from"`
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// Controls are the board controls the dispatch snapshot carries. Absent
// ones take karvi's defaults (DefaultControls).
type Controls struct {
	QualityThreshold  *float64 `json:"quality_threshold"`
	AutoDispatch      *bool    `json:"auto_dispatch"`
	AutoReview        *bool    `json:"auto_review"`
	AutoRedispatch    *bool    `json:"auto_redispatch"`
	MaxReviewAttempts *int     `json:"max_review_attempts"`
}

// Participant is a board participant; type is "human" or "agent".
type Participant struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Project is a karvi project entity (one exists only when the project was
// posted with a repo).
type Project struct {
	ID                string          `json:"id"`
	Title             string          `json:"title"`
	Repo              string          `json:"repo"`
	Status            string          `json:"status"`
	Concurrency       int             `json:"concurrency"`
	CompletionTrigger json.RawMessage `json:"completionTrigger"`
	TaskIDs           []string        `json:"taskIds"`
}

// Task returns the board task with the given id.
func (b Board) Task(id string) (Task, bool) {
	for _, t := range b.TaskPlan.Tasks {
		if t.ID == id {
			return t, true
		}
	}
	return Task{}, false
}

// Project returns the project with the given id.
func (b Board) Project(id string) (Project, bool) {
	for _, p := range b.Projects {
		if p.ID == id {
			return p, true
		}
	}
	return Project{}, false
}

// agent reports whether id names an agent participant: karvi's own
// dispatch paths take only tasks assigned to one.
func (b Board) agent(id string) bool {
	for _, p := range b.Participants {
		if p.ID == id && p.Type == "agent" {
			return true
		}
	}
	return false
}

// DecodeBoard reads a board as karvi serves it. The board's frame (version,
// task list, controls, projects) must decode; a single task that does not
// is kept with its DecodeErr so the others still run.
func DecodeBoard(data []byte) (Board, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Board{}, errors.New("board: must be a JSON object")
	}
	var frame struct {
		Version  json.RawMessage `json:"_version"`
		TaskPlan *struct {
			Goal  json.RawMessage   `json:"goal"`
			Tasks []json.RawMessage `json:"tasks"`
		} `json:"taskPlan"`
		Controls     json.RawMessage   `json:"controls"`
		Participants []json.RawMessage `json:"participants"`
		Projects     []json.RawMessage `json:"projects"`
	}
	if err := json.Unmarshal(trimmed, &frame); err != nil {
		return Board{}, fmt.Errorf("board: %s", mapping.DecodeProblem(err))
	}
	var b Board
	if v := nullToNil(frame.Version); v != nil {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || f < 0 || f != float64(int64(f)) {
			return Board{}, fmt.Errorf("board: _version: must be a whole number, got %s", truncate(string(v), 20))
		}
		b.Version = int64(f)
	}
	if c := nullToNil(frame.Controls); c != nil {
		if err := json.Unmarshal(c, &b.Controls); err != nil {
			return Board{}, fmt.Errorf("board: controls.%s", mapping.DecodeProblem(err))
		}
	}
	for _, raw := range frame.Participants {
		var p Participant
		if json.Unmarshal(raw, &p) != nil {
			continue // unreadable: not an agent karvi could dispatch to either
		}
		b.Participants = append(b.Participants, p)
	}
	for i, raw := range frame.Projects {
		var p Project
		if err := json.Unmarshal(raw, &p); err != nil {
			return Board{}, fmt.Errorf("board: projects[%d].%s", i, mapping.DecodeProblem(err))
		}
		p.CompletionTrigger = nullToNil(p.CompletionTrigger)
		b.Projects = append(b.Projects, p)
	}
	if tp := frame.TaskPlan; tp != nil {
		if g := nullToNil(tp.Goal); g != nil {
			_ = json.Unmarshal(g, &b.TaskPlan.Goal)
		}
		for i, raw := range tp.Tasks {
			b.TaskPlan.Tasks = append(b.TaskPlan.Tasks, decodeTask(raw, i))
		}
	}
	return b, nil
}

func decodeTask(raw json.RawMessage, i int) Task {
	var t Task
	if err := json.Unmarshal(raw, &t); err != nil {
		// Keep what routes the task (id, status, runtimeHint, projectId,
		// history) so a task of ours is blocked with the field named
		// rather than passed over as someone else's.
		t = probe(raw)
		if t.ID == "" {
			t.ID = fmt.Sprintf("tasks[%d]", i)
		}
		t.DecodeErr = mapping.DecodeProblem(err)
		return t
	}
	t.Estimate = nullToNil(t.Estimate)
	t.Scope = nullToNil(t.Scope)
	if t.Result != nil {
		t.Result.Payload = nullToNil(t.Result.Payload)
	}
	return t
}

// probe reads the routing fields of a task whose other fields do not
// decode, each on its own so one wrong type does not hide the others.
func probe(raw json.RawMessage) Task {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return Task{}
	}
	str := func(name string) string {
		var s string
		_ = json.Unmarshal(fields[name], &s)
		return s
	}
	t := Task{ID: str("id"), Status: str("status"), RuntimeHint: str("runtimeHint"), ProjectID: str("projectId"), Assignee: str("assignee")}
	_ = json.Unmarshal(fields["history"], &t.History)
	return t
}

func nullToNil(r json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(r); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	return r
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
