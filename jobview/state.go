package jobview

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// State is the part of the conductor's state.json the job view reads: each
// phase's status, its try number and the checks of that try. (The outcome
// rules read other parts: mapping.ConductorState.)
type State struct {
	PlanStatus string       `json:"plan_status"`
	Phases     []StatePhase `json:"phases"`
	// TotalCostUSD is what the conductor spent so far: edda adds every
	// agent call to it before the checks run, failed tries included.
	TotalCostUSD *float64 `json:"total_cost_usd"`
}

// StatePhase is one phase of state.json. Attempts is the try the phase is
// at; Checks are that try's, in the plan's order.
type StatePhase struct {
	ID       string       `json:"id"`
	Status   string       `json:"status"`
	Attempts int          `json:"attempts"`
	Checks   []StateCheck `json:"checks"`
}

// StateCheck is one check result (edda's CheckResult). Status is waiting,
// running, passed or failed.
type StateCheck struct {
	CheckType  string  `json:"check_type"`
	Status     string  `json:"status"`
	Detail     *string `json:"detail,omitempty"`
	DurationMS int64   `json:"duration_ms"`
}

// Bounds on what a state.json may make the view hold.
const (
	maxStatePhases = 256
	maxStateChecks = 32
	maxIDLen       = 64
)

// ParseState decodes state.json for the job view. Unknown members are
// ignored; a document that is not an object, or holds a wrong type where
// a field belongs, is an error. Statuses are lower-cased, details and ids
// clipped, and phases and checks beyond a sane number dropped.
func ParseState(data []byte) (State, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return State{}, errors.New("state.json: not a JSON object")
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return State{}, fmt.Errorf("state.json: %w", err)
	}
	s.PlanStatus = strings.ToLower(strings.TrimSpace(s.PlanStatus))
	if len(s.Phases) > maxStatePhases {
		s.Phases = s.Phases[:maxStatePhases]
	}
	for i := range s.Phases {
		p := &s.Phases[i]
		p.ID = clip(p.ID, maxIDLen)
		p.Status = strings.ToLower(clip(p.Status, maxIDLen))
		if len(p.Checks) > maxStateChecks {
			p.Checks = p.Checks[:maxStateChecks]
		}
		for j := range p.Checks {
			c := &p.Checks[j]
			c.CheckType = clip(c.CheckType, maxIDLen)
			c.Status = strings.ToLower(clip(c.Status, maxIDLen))
			c.DurationMS = max(c.DurationMS, 0)
			if c.Detail != nil {
				d := clip(*c.Detail, MaxOutputBytes)
				c.Detail = &d
			}
		}
	}
	return s, nil
}
