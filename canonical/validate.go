package canonical

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Fallbacks are what an unrecognised enum value degrades to. Each is a member
// of its own enum, so a degraded event validates cleanly the second time.
const (
	FallbackProvider = ProviderSystem
	FallbackMode     = ModeUnknown
	FallbackRole     = RoleCustom
	FallbackState    = StateIdle
	FallbackType     = TypeStateChange
)

// WarningKind classifies a warning.
type WarningKind string

// Warning kinds.
const (
	WarnEnum       WarningKind = "enum"       // a value outside its enum was degraded
	WarnTimestamp  WarningKind = "timestamp"  // ts was rewritten to UTC milliseconds
	WarnTransition WarningKind = "transition" // the state change is not in the table
	WarnRole       WarningKind = "role"       // an agent name had no role and became custom
)

// Warning is something Validate accepted but a reader should hear about.
type Warning struct {
	Kind    WarningKind
	Field   string
	Message string
}

func (w Warning) String() string { return fmt.Sprintf("%s: %s: %s", w.Kind, w.Field, w.Message) }

// FieldError is a missing or malformed field; the event carrying it is
// dropped.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return "canonical: " + e.Field + ": " + e.Message }

// Validate checks ev field by field. A missing required field or a value in
// the wrong format is an error (the caller drops the event and counts it;
// every such field is reported, joined). A value outside its enum is replaced
// by its fallback and reported as a warning. ts is rewritten to UTC with at
// most millisecond precision. The returned event is what the caller keeps;
// validating it again gives it back unchanged. Validate knows nothing of
// earlier events, so it cannot judge a state transition: Stream does.
func Validate(ev Event) (Event, []Warning, error) {
	var errs []error
	var warns []Warning
	fail := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}

	if ev.TS == "" {
		fail("ts", "missing")
	} else if ts, changed, err := normalizeTS(ev.TS); err != nil {
		fail("ts", "%v", err)
	} else if changed {
		warns = append(warns, Warning{WarnTimestamp, "ts", fmt.Sprintf("%q rewritten as %q", clip(ev.TS), ts)})
		ev.TS = ts
	}

	switch {
	case ev.RunID == "":
		fail("run_id", "missing")
	case !prefixedID(ev.RunID, "run-"):
		fail("run_id", "%q is not run- followed by letters, digits, '_' or '-'", clip(ev.RunID))
	}
	switch {
	case ev.AgentID == "":
		fail("agent_id", "missing")
	case !agentID(ev.AgentID):
		fail("agent_id", "%q is not 1 to 64 letters, digits, '_' or '-'", clip(ev.AgentID))
	}
	if ev.ParentAgentID != "" && !agentID(ev.ParentAgentID) {
		fail("parent_agent_id", "%q is not 1 to 64 letters, digits, '_' or '-'", clip(ev.ParentAgentID))
	}
	if ev.TaskID != "" && !prefixedID(ev.TaskID, "task-") {
		fail("task_id", "%q is not task- followed by letters, digits, '_' or '-'", clip(ev.TaskID))
	}
	if ev.IntentRef != "" && !prefixedID(ev.IntentRef, "plan-") {
		fail("intent_ref", "%q is not plan- followed by letters, digits, '_' or '-'", clip(ev.IntentRef))
	}
	if ev.RawRef != "" && !uri(ev.RawRef) {
		fail("raw_ref", "%q is not a URI (scheme:rest)", clip(ev.RawRef))
	}
	if p := bytes.TrimSpace(ev.Payload); len(p) == 0 || bytes.Equal(p, []byte("null")) {
		ev.Payload = nil
	} else if p[0] != '{' || !json.Valid(p) {
		fail("payload", "not a JSON object")
	}
	if m := ev.Metrics; m != nil {
		nonNegative(fail, "metrics.latency_ms", m.LatencyMS)
		nonNegative(fail, "metrics.cost_usd", m.CostUSD)
		if m.TokensIn != nil && *m.TokensIn < 0 {
			fail("metrics.tokens_in", "negative")
		}
		if m.TokensOut != nil && *m.TokensOut < 0 {
			fail("metrics.tokens_out", "negative")
		}
	}

	// Required enums: an absent one is an error, an unknown one degrades.
	if ev.Provider == "" {
		fail("provider", "missing")
	} else if !ev.Provider.Valid() {
		warns = append(warns, degraded("provider", string(ev.Provider), string(FallbackProvider)))
		ev.Provider = FallbackProvider
	}
	if ev.Mode != "" && !ev.Mode.Valid() {
		warns = append(warns, degraded("mode", string(ev.Mode), string(FallbackMode)))
		ev.Mode = FallbackMode
	}
	if ev.Role == "" {
		fail("role", "missing")
	} else if !ev.Role.Valid() {
		warns = append(warns, degraded("role", string(ev.Role), string(FallbackRole)))
		ev.Role = FallbackRole
	}
	if ev.State == "" {
		fail("state", "missing")
	} else if !ev.State.Valid() {
		warns = append(warns, degraded("state", string(ev.State), string(FallbackState)))
		ev.State = FallbackState
	}
	if ev.Type == "" {
		fail("type", "missing")
	} else if !ev.Type.Valid() {
		warns = append(warns, degraded("type", string(ev.Type), string(FallbackType)))
		ev.Type = FallbackType
	}

	if len(errs) > 0 {
		return Event{}, warns, errors.Join(errs...)
	}
	return ev, warns, nil
}

func degraded(field, got, to string) Warning {
	return Warning{WarnEnum, field, fmt.Sprintf("%q is not a known value; degraded to %q", clip(got), to)}
}

func nonNegative(fail func(string, string, ...any), field string, f *float64) {
	if f == nil {
		return
	}
	if math.IsNaN(*f) || math.IsInf(*f, 0) || *f < 0 {
		fail(field, "%v is not a finite number >= 0", *f)
	}
}

// tsLayout writes UTC with milliseconds only when they are not zero, so the
// common "…:00Z" stays as written.
const tsLayout = "2006-01-02T15:04:05.999Z07:00"

// normalizeTS parses an RFC 3339 time and returns it in UTC at millisecond
// precision, reporting whether that changed the text.
func normalizeTS(s string) (string, bool, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return "", false, fmt.Errorf("%q is not an ISO 8601 (RFC 3339) time", clip(s))
	}
	// Checked in UTC: an offset can carry year 0001 or 9999 out of range.
	t = t.UTC().Truncate(time.Millisecond)
	if t.Year() < 1 || t.Year() > 9999 {
		return "", false, fmt.Errorf("%q is out of range", clip(s))
	}
	out := t.Format(tsLayout)
	return out, out != s, nil
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func agentID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return false
		}
	}
	return true
}

// prefixedID reports prefix followed by at least one id character. The
// document sets no upper bound; 256 bytes keeps a hostile line from
// carrying a megabyte in a key field.
func prefixedID(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) == 0 || len(rest) > 256 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if !idByte(rest[i]) {
			return false
		}
	}
	return true
}

// uri accepts scheme ":" rest with a scheme as RFC 3986 spells it and no
// control characters or spaces, which is all a pointer for debugging needs.
func uri(s string) bool {
	i := strings.IndexByte(s, ':')
	if i < 1 || i == len(s)-1 || len(s) > 4096 {
		return false
	}
	for j := 0; j < i; j++ {
		c := s[j]
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if j == 0 && !alpha || !alpha && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	for j := i + 1; j < len(s); j++ {
		if s[j] <= ' ' || s[j] == 0x7f {
			return false
		}
	}
	return true
}

// clip keeps messages short when a field is huge.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "…"
}

// transitions is the table of allowed state changes: the regular ones, then
// the ones into a terminal or error state, then recycling a finished agent.
var transitions = map[State][]State{
	StateIdle:    {StateRunning, StateCancelled},
	StateRunning: {StateWaiting, StateBlocked, StateError, StateDone, StateCancelled},
	StateWaiting: {StateRunning, StateError},
	StateBlocked: {StateRunning, StateCancelled, StateError},
	StateError:   {StateRunning, StateFailed, StateWaiting},
	// A phase the conductor gave up on because its agent met a usage
	// limit is taken back: it waits for the reset, then runs again.
	StateFailed: {StateWaiting},
	StateDone:   {StateIdle},
}

// Transition reports whether an agent may go from one state to the other.
// Staying in the same state is no transition and always allowed: an agent
// reports many events while running.
func Transition(from, to State) bool {
	if from == to {
		return from.Valid()
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Stream validates a sequence of events, remembering each agent's last
// state to judge transitions. An agent is keyed by run and agent id. Its
// first event is not judged: a reader that starts mid-file cannot know what
// came before. The zero value is ready; a Stream is not safe for concurrent
// use.
type Stream struct {
	last map[agentKey]State
	// Dropped counts the events Validate rejected.
	Dropped int
}

type agentKey struct{ run, agent string }

// Validate is the package Validate plus the transition check: a change the
// table does not allow is a warning and the event is kept.
func (s *Stream) Validate(ev Event) (Event, []Warning, error) {
	out, warns, err := Validate(ev)
	if err != nil {
		s.Dropped++
		return out, warns, err
	}
	if s.last == nil {
		s.last = make(map[agentKey]State)
	}
	k := agentKey{out.RunID, out.AgentID}
	prev, seen := s.last[k]
	switch {
	case seen && !Transition(prev, out.State):
		warns = append(warns, Warning{WarnTransition, "state",
			fmt.Sprintf("agent %s: %s -> %s is not an allowed transition", out.AgentID, prev, out.State)})
	case out.Type == TypeStateChange && (seen && prev == out.State || samePayloadStates(out.Payload)):
		// A viewer takes a state_change for a change: one that stays put
		// is a change to nowhere, which it reports.
		warns = append(warns, Warning{WarnTransition, "state",
			fmt.Sprintf("agent %s: a state_change from %s to %s", out.AgentID, firstNonEmpty(string(prev), string(out.State)), out.State)})
	}
	s.last[k] = out.State
	return out, warns, nil
}

// samePayloadStates reports a state_change payload whose from and to are
// the same state.
func samePayloadStates(p json.RawMessage) bool {
	var c struct{ From, To State }
	if len(p) == 0 || json.Unmarshal(p, &c) != nil {
		return false
	}
	return c.From != "" && c.From == c.To
}
