package canonical

import (
	"encoding/json"
	"fmt"
)

// Provider is where an event came from: a model's tooling or the system.
type Provider string

// Providers.
const (
	ProviderClaude Provider = "claude"
	ProviderGemini Provider = "gemini"
	ProviderCodex  Provider = "codex"
	ProviderSystem Provider = "system"
)

// Mode is the orchestration mode a run executes in.
type Mode string

// Modes. ModeUnknown is itself a member: it is what an unrecognised mode
// degrades to.
const (
	ModeRalph      Mode = "ralph"
	ModeUltrawork  Mode = "ultrawork"
	ModeUltrapilot Mode = "ultrapilot"
	ModeTeam       Mode = "team"
	ModeAutopilot  Mode = "autopilot"
	ModePipeline   Mode = "pipeline"
	ModeEcomode    Mode = "ecomode"
	ModeUnknown    Mode = "unknown"
)

// Role is the part an agent plays.
type Role string

// Roles.
const (
	RolePlanner   Role = "planner"
	RoleExecutor  Role = "executor"
	RoleReviewer  Role = "reviewer"
	RoleGuard     Role = "guard"
	RoleTester    Role = "tester"
	RoleWriter    Role = "writer"
	RoleExplorer  Role = "explorer"
	RoleArchitect Role = "architect"
	RoleDebugger  Role = "debugger"
	RoleVerifier  Role = "verifier"
	RoleDesigner  Role = "designer"
	RoleCustom    Role = "custom"
)

// State is what the agent is doing now; it is independent of Type, which
// says what happened.
type State string

// States. Done, Failed and Cancelled are terminal (see Transition).
const (
	StateIdle      State = "idle"
	StateRunning   State = "running"
	StateWaiting   State = "waiting"
	StateBlocked   State = "blocked"
	StateError     State = "error"
	StateDone      State = "done"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
)

// Type is the kind of event.
type Type string

// Types.
const (
	TypeTaskSpawn   Type = "task_spawn"
	TypeTaskUpdate  Type = "task_update"
	TypeTaskDone    Type = "task_done"
	TypeToolCall    Type = "tool_call"
	TypeToolResult  Type = "tool_result"
	TypeMessage     Type = "message"
	TypeError       Type = "error"
	TypeReplan      Type = "replan"
	TypeVerify      Type = "verify"
	TypeFix         Type = "fix"
	TypeRecover     Type = "recover"
	TypeStateChange Type = "state_change"
)

// The members of each enum, in declaration order.
var (
	Providers = []Provider{ProviderClaude, ProviderGemini, ProviderCodex, ProviderSystem}
	Modes     = []Mode{ModeRalph, ModeUltrawork, ModeUltrapilot, ModeTeam, ModeAutopilot, ModePipeline, ModeEcomode, ModeUnknown}
	Roles     = []Role{RolePlanner, RoleExecutor, RoleReviewer, RoleGuard, RoleTester, RoleWriter,
		RoleExplorer, RoleArchitect, RoleDebugger, RoleVerifier, RoleDesigner, RoleCustom}
	States = []State{StateIdle, StateRunning, StateWaiting, StateBlocked, StateError, StateDone, StateFailed, StateCancelled}
	Types  = []Type{TypeTaskSpawn, TypeTaskUpdate, TypeTaskDone, TypeToolCall, TypeToolResult, TypeMessage,
		TypeError, TypeReplan, TypeVerify, TypeFix, TypeRecover, TypeStateChange}
)

// Valid reports whether p is a member of the enum.
func (p Provider) Valid() bool {
	switch p {
	case ProviderClaude, ProviderGemini, ProviderCodex, ProviderSystem:
		return true
	}
	return false
}

// Valid reports whether m is a member of the enum; the empty mode (absent)
// is not.
func (m Mode) Valid() bool {
	switch m {
	case ModeRalph, ModeUltrawork, ModeUltrapilot, ModeTeam, ModeAutopilot, ModePipeline, ModeEcomode, ModeUnknown:
		return true
	}
	return false
}

// Valid reports whether r is a member of the enum.
func (r Role) Valid() bool {
	switch r {
	case RolePlanner, RoleExecutor, RoleReviewer, RoleGuard, RoleTester, RoleWriter,
		RoleExplorer, RoleArchitect, RoleDebugger, RoleVerifier, RoleDesigner, RoleCustom:
		return true
	}
	return false
}

// Valid reports whether s is a member of the enum.
func (s State) Valid() bool {
	switch s {
	case StateIdle, StateRunning, StateWaiting, StateBlocked, StateError, StateDone, StateFailed, StateCancelled:
		return true
	}
	return false
}

// Terminal reports done, failed and cancelled.
func (s State) Terminal() bool {
	return s == StateDone || s == StateFailed || s == StateCancelled
}

// Valid reports whether t is a member of the enum.
func (t Type) Valid() bool {
	switch t {
	case TypeTaskSpawn, TypeTaskUpdate, TypeTaskDone, TypeToolCall, TypeToolResult, TypeMessage,
		TypeError, TypeReplan, TypeVerify, TypeFix, TypeRecover, TypeStateChange:
		return true
	}
	return false
}

// Metrics is the cost of the work an event reports. A nil field is a figure
// the source does not give; it is written as null, not left out, so a
// reader can tell "unknown" from a field this version does not know.
type Metrics struct {
	LatencyMS *float64 `json:"latency_ms"`
	TokensIn  *int64   `json:"tokens_in"`
	TokensOut *int64   `json:"tokens_out"`
	CostUSD   *float64 `json:"cost_usd"`
}

// Event is one canonical event: who (agent, role) in which run, in what
// state, reported what (type, payload), at what cost (metrics), and where
// the source line is (raw_ref).
type Event struct {
	TS            string          `json:"ts"`
	RunID         string          `json:"run_id"`
	Provider      Provider        `json:"provider"`
	Mode          Mode            `json:"mode,omitempty"`
	AgentID       string          `json:"agent_id"`
	ParentAgentID string          `json:"parent_agent_id,omitempty"`
	Role          Role            `json:"role"`
	State         State           `json:"state"`
	Type          Type            `json:"type"`
	TaskID        string          `json:"task_id,omitempty"`
	IntentRef     string          `json:"intent_ref,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Metrics       *Metrics        `json:"metrics,omitempty"`
	RawRef        string          `json:"raw_ref,omitempty"`
}

// Parse decodes one JSON event without validating it (Validate does that).
// A line that is not a JSON object of the right shape is an error the
// caller counts and drops.
func Parse(line []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return Event{}, fmt.Errorf("canonical: parse: %w", err)
	}
	return ev, nil
}
