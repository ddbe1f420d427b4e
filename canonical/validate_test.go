package canonical

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func base() Event {
	return Event{
		TS: "2026-02-17T22:27:00Z", RunID: "run-1", Provider: ProviderClaude,
		AgentID: "coder-auth", Role: RoleExecutor, State: StateRunning, Type: TypeMessage,
	}
}

func TestTransitionTable(t *testing.T) {
	allowed := map[[2]State]bool{
		// regular
		{StateIdle, StateRunning}:    true,
		{StateRunning, StateWaiting}: true,
		{StateWaiting, StateRunning}: true,
		{StateRunning, StateBlocked}: true,
		{StateBlocked, StateRunning}: true,
		{StateRunning, StateError}:   true,
		{StateError, StateRunning}:   true,
		{StateRunning, StateDone}:    true,
		// terminal and timeouts
		{StateError, StateFailed}:      true,
		{StateIdle, StateCancelled}:    true,
		{StateRunning, StateCancelled}: true,
		{StateBlocked, StateCancelled}: true,
		{StateBlocked, StateError}:     true,
		{StateWaiting, StateError}:     true,
		// recycling
		{StateDone, StateIdle}: true,
		// a phase stopped on a usage limit waits for the reset
		{StateError, StateWaiting}:  true,
		{StateFailed, StateWaiting}: true,
	}
	for _, from := range States {
		for _, to := range States {
			want := from == to || allowed[[2]State{from, to}]
			if got := Transition(from, to); got != want {
				t.Errorf("Transition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if Transition("bogus", "bogus") || Transition("bogus", StateIdle) || Transition(StateIdle, "bogus") {
		t.Error("a state outside the enum made a transition")
	}
	// Terminal states have no way out but recycling a done agent and a
	// failed one waiting for a usage limit's reset.
	for _, s := range []State{StateFailed, StateCancelled} {
		for _, to := range States {
			if to != s && Transition(s, to) && !(s == StateFailed && to == StateWaiting) {
				t.Errorf("terminal %s -> %s allowed", s, to)
			}
		}
	}
}

func TestEnumsValidateUnchanged(t *testing.T) {
	check := func(name string, ev Event) {
		t.Helper()
		got, warns, err := Validate(ev)
		if err != nil || len(warns) != 0 || !reflect.DeepEqual(got, ev) {
			t.Errorf("%s: got %+v, %v, %v", name, got, warns, err)
		}
	}
	for _, v := range Providers {
		ev := base()
		ev.Provider = v
		check(string(v), ev)
	}
	for _, v := range Modes {
		ev := base()
		ev.Mode = v
		check(string(v), ev)
	}
	for _, v := range Roles {
		ev := base()
		ev.Role = v
		check(string(v), ev)
	}
	for _, v := range States {
		ev := base()
		ev.State = v
		check(string(v), ev)
	}
	for _, v := range Types {
		ev := base()
		ev.Type = v
		check(string(v), ev)
	}
	if len(Providers) != 4 || len(Modes) != 8 || len(Roles) != 12 || len(States) != 8 || len(Types) != 12 {
		t.Error("an enum lost or gained a member")
	}
}

func TestUnknownEnumsDegrade(t *testing.T) {
	for _, bad := range []string{"unknown", "Claude", "openai"} {
		ev := base()
		ev.Provider, ev.Mode, ev.Role, ev.State, ev.Type = Provider(bad), Mode(bad), Role(bad), State(bad), Type(bad)
		got, warns, err := Validate(ev)
		if err != nil {
			t.Fatalf("%s: %v", bad, err)
		}
		wantMode := FallbackMode
		wantWarns := 5
		if bad == "unknown" {
			wantWarns = 4 // unknown is a mode
		}
		if got.Provider != FallbackProvider || got.Mode != wantMode || got.Role != FallbackRole ||
			got.State != FallbackState || got.Type != FallbackType {
			t.Errorf("%s: degraded to %+v", bad, got)
		}
		if len(warns) != wantWarns {
			t.Errorf("%s: %d warnings, want %d: %v", bad, len(warns), wantWarns, warns)
		}
		for _, w := range warns {
			if w.Kind != WarnEnum {
				t.Errorf("%s: warning %v", bad, w)
			}
		}
		again, warns, err := Validate(got)
		if err != nil || len(warns) != 0 || !reflect.DeepEqual(again, got) {
			t.Errorf("%s: degraded event does not re-validate cleanly: %v %v", bad, warns, err)
		}
	}
}

func TestRequiredAndFormats(t *testing.T) {
	neg := -1.0
	negInt := int64(-1)
	nan := math.NaN()
	tests := []struct {
		field string
		edit  func(*Event)
	}{
		{"ts", func(e *Event) { e.TS = "" }},
		{"ts", func(e *Event) { e.TS = "yesterday" }},
		{"ts", func(e *Event) { e.TS = "2026-02-17 22:27:00" }},
		{"run_id", func(e *Event) { e.RunID = "" }},
		{"run_id", func(e *Event) { e.RunID = "1" }},
		{"run_id", func(e *Event) { e.RunID = "run-" }},
		{"run_id", func(e *Event) { e.RunID = "run-a b" }},
		{"provider", func(e *Event) { e.Provider = "" }},
		{"agent_id", func(e *Event) { e.AgentID = "" }},
		{"agent_id", func(e *Event) { e.AgentID = strings.Repeat("a", 65) }},
		{"agent_id", func(e *Event) { e.AgentID = "a.b" }},
		{"parent_agent_id", func(e *Event) { e.ParentAgentID = "a/b" }},
		{"role", func(e *Event) { e.Role = "" }},
		{"state", func(e *Event) { e.State = "" }},
		{"type", func(e *Event) { e.Type = "" }},
		{"task_id", func(e *Event) { e.TaskID = "42" }},
		{"intent_ref", func(e *Event) { e.IntentRef = "plan-" }},
		{"raw_ref", func(e *Event) { e.RawRef = "no scheme" }},
		{"raw_ref", func(e *Event) { e.RawRef = "1x:y" }},
		{"payload", func(e *Event) { e.Payload = json.RawMessage(`[1]`) }},
		{"payload", func(e *Event) { e.Payload = json.RawMessage(`{"a":`) }},
		{"metrics.latency_ms", func(e *Event) { e.Metrics = &Metrics{LatencyMS: &neg} }},
		{"metrics.cost_usd", func(e *Event) { e.Metrics = &Metrics{CostUSD: &nan} }},
		{"metrics.tokens_in", func(e *Event) { e.Metrics = &Metrics{TokensIn: &negInt} }},
		{"metrics.tokens_out", func(e *Event) { e.Metrics = &Metrics{TokensOut: &negInt} }},
	}
	for _, tc := range tests {
		ev := base()
		tc.edit(&ev)
		_, _, err := Validate(ev)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: error %v", tc.field, err)
		}
	}
	// Every bad field is reported, not only the first.
	_, _, err := Validate(Event{})
	for _, f := range []string{"ts", "run_id", "provider", "agent_id", "role", "state", "type"} {
		if err == nil || !strings.Contains(err.Error(), "canonical: "+f+": missing") {
			t.Errorf("empty event: %v lacks %s", err, f)
		}
	}
}

func TestOptionalFieldsAccepted(t *testing.T) {
	ev := base()
	ev.Mode, ev.ParentAgentID, ev.TaskID, ev.IntentRef = ModeRalph, "planner-main", "task-42", "plan-7"
	ev.RawRef = "file:///var/log/run.jsonl#offset=12"
	ev.Payload = json.RawMessage(`{"message":"hi"}`)
	ev.Metrics = &Metrics{} // every figure unavailable
	if got, warns, err := Validate(ev); err != nil || len(warns) != 0 || !reflect.DeepEqual(got, ev) {
		t.Errorf("got %+v %v %v", got, warns, err)
	}
	ev.Payload = json.RawMessage(" null ")
	got, _, err := Validate(ev)
	if err != nil || got.Payload != nil {
		t.Errorf("null payload: %s %v", got.Payload, err)
	}
}

func TestTimestampNormalised(t *testing.T) {
	for in, want := range map[string]string{
		"2026-02-17T22:27:00Z":           "",
		"2026-02-17T22:27:00.123Z":       "",
		"2026-02-17T22:27:00.1Z":         "",
		"2026-02-17T22:27:00.100Z":       "2026-02-17T22:27:00.1Z",
		"2026-02-17T22:27:00.123456789Z": "2026-02-17T22:27:00.123Z",
		"2026-02-18T07:27:00+09:00":      "2026-02-17T22:27:00Z",
	} {
		ev := base()
		ev.TS = in
		got, warns, err := Validate(ev)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if want == "" {
			if got.TS != in || len(warns) != 0 {
				t.Errorf("%s: rewritten to %s, %v", in, got.TS, warns)
			}
			continue
		}
		if got.TS != want || len(warns) != 1 || warns[0].Kind != WarnTimestamp {
			t.Errorf("%s: got %s %v, want %s", in, got.TS, warns, want)
		}
	}
}

func TestStreamTransitions(t *testing.T) {
	var s Stream
	step := func(agent string, st State, wantWarn bool) {
		t.Helper()
		ev := base()
		ev.AgentID, ev.State = agent, st
		_, warns, err := s.Validate(ev)
		if err != nil {
			t.Fatal(err)
		}
		got := len(warns) == 1 && warns[0].Kind == WarnTransition
		if got != wantWarn || len(warns) > 1 {
			t.Errorf("%s -> %s: warnings %v", agent, st, warns)
		}
	}
	step("a", StateDone, false) // first sighting is not judged
	step("a", StateIdle, false)
	step("a", StateRunning, false)
	step("b", StateRunning, false) // another agent has its own state
	step("a", StateRunning, false)
	step("a", StateFailed, true) // running -> failed skips error
	step("b", StateError, false)
	step("b", StateFailed, false)
	step("b", StateRunning, true) // out of a terminal state
	ev := base()
	ev.RunID = ""
	if _, _, err := s.Validate(ev); err == nil || s.Dropped != 1 {
		t.Errorf("dropped %d, err %v", s.Dropped, err)
	}
}
