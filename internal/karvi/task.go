package karvi

import (
	"encoding/json"
	"fmt"
)

// Task is the part of a karvi task this project reads. Decoding is
// tolerant: karvi stores whatever callers posted in blocker, result and
// dispatch, so a field of an unexpected type is left empty rather than
// failing the whole task list; Raw keeps the task as karvi sent it.
type Task struct {
	ID     string
	Title  string
	Status string
	// BriefPath is set when karvi keeps a brief for the task.
	BriefPath string
	// Blocker is nil when karvi holds none (or null).
	Blocker *Blocker
	// Dispatch is nil when karvi holds none; karvi itself no longer writes it.
	Dispatch *Dispatch
	// Result is task.result as karvi holds it (nil when absent or null).
	Result json.RawMessage
	// Raw is the whole task object.
	Raw json.RawMessage
}

// Blocker is task.blocker.
type Blocker struct {
	Type    string
	Reason  string
	AskedAt string
}

// Dispatch is task.dispatch.
type Dispatch struct {
	State     string
	PlanID    string
	LastError string
}

// UnmarshalJSON decodes one task object tolerantly.
func (t *Task) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("karvi task: %w", err)
	}
	*t = Task{Raw: append(json.RawMessage(nil), b...)}
	t.ID = str(m["id"])
	t.Title = str(m["title"])
	t.Status = str(m["status"])
	t.BriefPath = str(m["briefPath"])
	if obj := object(m["blocker"]); obj != nil {
		t.Blocker = &Blocker{Type: str(obj["type"]), Reason: str(obj["reason"]), AskedAt: str(obj["askedAt"])}
	}
	if obj := object(m["dispatch"]); obj != nil {
		t.Dispatch = &Dispatch{State: str(obj["state"]), PlanID: str(obj["planId"]), LastError: str(obj["lastError"])}
	}
	if r, ok := m["result"]; ok && string(r) != "null" {
		t.Result = append(json.RawMessage(nil), r...)
	}
	return nil
}

// str returns a JSON string's value, or "" for anything else.
func str(r json.RawMessage) string {
	var s string
	if json.Unmarshal(r, &s) != nil {
		return ""
	}
	return s
}

// object returns a JSON object's members, or nil for anything else.
func object(r json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(r, &m) != nil {
		return nil
	}
	return m
}
