// Package intakeapi is what a client, the worker and the intake's
// activities share with the karvi intake workflow: its names, its input,
// its status, the activities' inputs and results, and Intakes, the
// Temporal calls on an intake. It links no worker code.
package intakeapi

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"time"

	"karvi-edda-temporal/intake"
)

// Names of the intake workflow, its query and its activities. They are
// part of the public interface and never change.
const (
	WorkflowName = "KarviIntakeWorkflow"
	QueryStatus  = "status"
	// FollowActivity follows karvi's live feed and returns when the board
	// asks for something.
	FollowActivity = "KarviIntakeFollow"
	// ApplyActivity carries out one action of a tick.
	ApplyActivity = "KarviIntakeApply"
)

var unsafeInID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// WorkflowID is the one intake workflow of a karvi board:
// karvi-intake-<host-port-path> of its base URL.
func WorkflowID(boardURL string) string {
	s := strings.TrimRight(boardURL, "/")
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		s = u.Host + u.Path
	}
	return "karvi-intake-" + strings.Trim(unsafeInID.ReplaceAllString(s, "-"), "-")
}

// Input starts (or continues) an intake workflow. A client sets BoardURL
// and, if it likes, RuntimeHint, TimeoutSec and TaskQueue; the rest is
// handed over by continue-as-new. The token is never in it: the worker's
// activities read it from their own environment.
type Input struct {
	BoardURL string `json:"boardUrl"`
	// RuntimeHint routes a task here; "" means intake.DefaultRuntimeHint.
	RuntimeHint string `json:"runtimeHint,omitempty"`
	// TimeoutSec is the timeoutSec of the plans it builds; 0 is karvi's 300.
	TimeoutSec int `json:"timeoutSec,omitempty"`
	// TaskQueue is where the task workflows run; "" is the intake's own.
	TaskQueue string `json:"taskQueue,omitempty"`
	// Poll is how often the feed's follower reads the board again and
	// checks which task workflows ended (default DefaultPoll).
	Poll time.Duration `json:"poll,omitempty"`
	// TicksBeforeContinue continues-as-new after this many ticks even when
	// the server does not suggest it yet (default DefaultTicks).
	TicksBeforeContinue int `json:"ticksBeforeContinue,omitempty"`
	// TimeScale divides the intake's periods (its default poll, how long a
	// follow waits, its waits after a failure or a refused token) and is
	// handed to every task and run it starts (taskapi.Tuning.TimeScale):
	// the worker's -time-scale (internal/timescale); 0 is real time.
	TimeScale float64 `json:"timeScale,omitempty"`

	// Carried over continue-as-new.
	State   intake.State `json:"state"`
	Skipped []Note       `json:"skipped,omitempty"`
	Recent  []Note       `json:"recent,omitempty"`
	Counts  Counts       `json:"counts"`
}

// Defaults of Input.
const (
	DefaultPoll  = 10 * time.Second
	DefaultTicks = 500
	// MaxRecent is how many recent actions the status keeps.
	MaxRecent = 50
)

// Config is the intake rules' configuration of the input.
func (in Input) Config() intake.Config {
	return intake.Config{RuntimeHint: in.RuntimeHint, TimeoutSec: in.TimeoutSec}
}

// Note is one action or skip, as the status shows it.
type Note struct {
	Kind      intake.Kind `json:"kind"`
	TaskID    string      `json:"taskId,omitempty"`
	ProjectID string      `json:"projectId,omitempty"`
	Reason    string      `json:"reason,omitempty"`
	// Result is what carrying it out did ("started", "already started", ...).
	Result string    `json:"result,omitempty"`
	At     time.Time `json:"at"`
}

// SameNote reports whether two notes say the same (their times aside).
func SameNote(a, b Note) bool {
	return a.Kind == b.Kind && a.TaskID == b.TaskID && a.ProjectID == b.ProjectID && a.Reason == b.Reason
}

// Counts are the intake's totals since it was first started.
type Counts struct {
	Ticks       int `json:"ticks"`
	Started     int `json:"started"`
	Redispatch  int `json:"redispatched"`
	Aborted     int `json:"aborted"`
	Blocked     int `json:"blocked"`
	Failed      int `json:"failed"`
	Continued   int `json:"continuedAsNew"`
	BoardsRead  int `json:"boardsRead"`
	EndsSeen    int `json:"endsSeen"`
	Unreachable int `json:"unreachable"`
}

// Status answers QueryStatus: what the intake follows, what it claimed,
// what it skipped and why.
type Status struct {
	BoardURL    string `json:"boardUrl"`
	RuntimeHint string `json:"runtimeHint"`
	TaskQueue   string `json:"taskQueue"`
	// Version is the highest board _version the intake acted on.
	Version int64             `json:"version"`
	Claims  []intake.Claim    `json:"claims"`
	Runs    []intake.RunClaim `json:"runs,omitempty"`
	// Skipped are the tasks the last board read passed over, with why.
	Skipped []Note `json:"skipped,omitempty"`
	// Recent are the last actions carried out, newest last.
	Recent []Note `json:"recent,omitempty"`
	// Problem is why karvi cannot be read now (unreachable, unauthorized),
	// "" when it can.
	Problem string `json:"problem,omitempty"`
	Counts  Counts `json:"counts"`
}

// FollowInput asks the follower to wait until the board asks for
// something the intake has not done yet.
type FollowInput struct {
	BoardURL    string        `json:"boardUrl"`
	RuntimeHint string        `json:"runtimeHint,omitempty"`
	TimeoutSec  int           `json:"timeoutSec,omitempty"`
	State       intake.State  `json:"state"`
	Poll        time.Duration `json:"poll,omitempty"`
	// MaxWait returns an empty result after this long with nothing new.
	MaxWait time.Duration `json:"maxWait,omitempty"`
	// Skipped is the skips the intake shows now; a board whose skips
	// differ is returned so the status stays true.
	Skipped []Note `json:"skipped,omitempty"`
	// Problem is the problem the intake shows now; the follower returns
	// when karvi's answer changes it (a new problem, or none any more).
	Problem string `json:"problem,omitempty"`
	// Owner names the intake to the follower as to ApplyInput: a claim
	// follows only the workflows marked with it.
	Owner string `json:"owner,omitempty"`
}

// Config is the intake rules' configuration of the follow input.
func (in FollowInput) Config() intake.Config {
	return intake.Config{RuntimeHint: in.RuntimeHint, TimeoutSec: in.TimeoutSec}
}

// FollowResult is what the follower found.
type FollowResult struct {
	// Board is the board to reconcile (trimmed to the fields the intake
	// reads), nil when there is none.
	Board json.RawMessage `json:"board,omitempty"`
	// Ended are task workflows of running claims that closed.
	Ended []Ended `json:"ended,omitempty"`
	// Problem says why karvi could not be read (the follower kept
	// trying until MaxWait); Unauthorized when karvi answered 401/403.
	Problem      string `json:"problem,omitempty"`
	Unauthorized bool   `json:"unauthorized,omitempty"`
}

// Ended reports a task workflow that closed and the status it left the
// task in on karvi ("" when it did not close with a result).
type Ended struct {
	TaskID string `json:"taskId"`
	Final  string `json:"final"`
	// How is the workflow's close status (completed, failed, terminated...).
	How string `json:"how"`
	// RunID is the run id of the workflow that closed.
	RunID string `json:"runId,omitempty"`
}

// ApplyInput carries out one action.
type ApplyInput struct {
	BoardURL  string `json:"boardUrl"`
	TaskQueue string `json:"taskQueue"`
	// Owner is the intake carrying out the action: its workflow id and
	// first run id (Owner). With the action's claim key it makes the mark
	// of the workflows the intake starts, so it acts only on its own; ""
	// (an intake from before the marks) keeps the checks of then.
	Owner  string        `json:"owner,omitempty"`
	Action intake.Action `json:"action"`
	// TimeScale is the intake's (Input.TimeScale): the tasks and runs it
	// starts carry it.
	TimeScale float64 `json:"timeScale,omitempty"`
}

// Owner is the owner an intake workflow names itself by: its workflow id
// and the first run id of its chain, the same across continue-as-new and
// new when the intake is started afresh (its claim keys start over then).
func Owner(workflowID, firstRunID string) string { return workflowID + "/" + firstRunID }

// ApplyResult says what carrying out an action did.
type ApplyResult struct {
	Result string `json:"result"`
	// Refused, set when the task (or the project) was not run because its
	// workflow id is someone else's, is the reason it was blocked on
	// karvi with: the intake refuses the claim (intake.State.Refused).
	Refused string `json:"refused,omitempty"`
}
