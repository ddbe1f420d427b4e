package canonical

import (
	"encoding/json"
	"strings"
	"testing"
)

func followEvent(agent string, st State, typ Type, payload string) Event {
	ev := Event{TS: "2026-01-02T03:04:05Z", RunID: "run-T5", Provider: ProviderSystem, AgentID: agent,
		Role: RoleExecutor, State: st, Type: typ, RawRef: "file:/x#offset=1"}
	if payload != "" {
		ev.Payload = json.RawMessage(payload)
	}
	return ev
}

// replay feeds events through Follow and Validate as the store does and
// returns the states written and the warnings.
func replay(t *testing.T, evs ...Event) (states []string, warns []string) {
	t.Helper()
	var s Stream
	for _, ev := range evs {
		for _, out := range s.Follow(ev) {
			v, ws, err := s.Validate(out)
			if err != nil {
				t.Fatalf("%+v: %v", out, err)
			}
			for _, w := range ws {
				warns = append(warns, w.String())
			}
			states = append(states, string(v.State)+"/"+string(v.Type))
		}
	}
	return states, warns
}

// Each transition the producers make that the table does not list is
// bridged with the states the table asks for, and a change that repeats
// the state is no state_change: replayed, the stream has no warning.
func TestFollowBridgesEveryTransitionCase(t *testing.T) {
	run := func(st State, typ Type) Event { return followEvent("test", st, typ, "") }
	change := func(from, to State) Event {
		return followEvent("test", to, TypeStateChange, `{"from":"`+string(from)+`","to":"`+string(to)+`"}`)
	}
	cases := []struct {
		name string
		evs  []Event
		want string
	}{
		{"a phase failing for good goes through error",
			[]Event{change(StateIdle, StateRunning), run(StateFailed, TypeError)},
			"running/state_change error/state_change failed/error"},
		{"a failure after a failed check goes through error",
			[]Event{change(StateIdle, StateRunning), run(StateRunning, TypeVerify), run(StateRunning, TypeFix), run(StateFailed, TypeError)},
			"running/state_change running/verify running/fix error/state_change failed/error"},
		{"an agent id reused after done is idle first",
			[]Event{change(StateIdle, StateRunning), run(StateDone, TypeTaskDone), change(StateIdle, StateRunning)},
			"running/state_change done/task_done idle/state_change running/state_change"},
		{"a repeated state is an update, not a change",
			[]Event{change(StateIdle, StateBlocked), change(StateBlocked, StateBlocked)},
			"blocked/state_change blocked/task_update"},
		{"a waiting agent that ends passes through running",
			[]Event{change(StateRunning, StateWaiting), run(StateDone, TypeTaskDone)},
			"waiting/state_change running/state_change done/task_done"},
		{"a terminal state has no way out: kept, and the warning stays",
			[]Event{run(StateCancelled, TypeTaskDone), change(StateIdle, StateRunning)},
			"cancelled/task_done running/state_change"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			states, warns := replay(t, c.evs...)
			if got := strings.Join(states, " "); got != c.want {
				t.Errorf("states %s\nwant   %s", got, c.want)
			}
			terminal := strings.HasPrefix(c.name, "a terminal")
			if terminal != (len(warns) > 0) {
				t.Errorf("warnings: %v", warns)
			}
		})
	}
}

// A bridge names the change it stands for, carries no raw_ref (so the
// store never takes it for the event it precedes) and keeps the agent.
func TestFollowBridgeEvent(t *testing.T) {
	var s Stream
	first := followEvent("test", StateRunning, TypeStateChange, `{"from":"idle","to":"running"}`)
	if _, _, err := s.Validate(first); err != nil {
		t.Fatal(err)
	}
	out := s.Follow(followEvent("test", StateFailed, TypeError, `{"error_type":"x","message":"m"}`))
	if len(out) != 2 {
		t.Fatalf("%d events", len(out))
	}
	b := out[0]
	if b.State != StateError || b.Type != TypeStateChange || b.RawRef != "" || b.AgentID != "test" || b.Role != RoleExecutor {
		t.Errorf("bridge %+v", b)
	}
	var p struct{ From, To, Trigger string }
	if err := json.Unmarshal(b.Payload, &p); err != nil || p.From != "running" || p.To != "error" || p.Trigger != "implied" {
		t.Errorf("payload %s", b.Payload)
	}
}

// The stream warns for a state_change that repeats the agent's state, or
// whose payload says it goes from a state to the same one.
func TestStreamWarnsOnARepeatedState(t *testing.T) {
	var s Stream
	for i, c := range []struct {
		ev   Event
		warn bool
	}{
		{followEvent("a", StateRunning, TypeStateChange, `{"from":"idle","to":"running"}`), false},
		{followEvent("a", StateRunning, TypeMessage, ""), false},
		{followEvent("a", StateRunning, TypeStateChange, `{"from":"running","to":"running"}`), true},
		{followEvent("b", StateBlocked, TypeStateChange, `{"from":"blocked","to":"blocked"}`), true},
	} {
		_, ws, err := s.Validate(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if (len(ws) > 0) != c.warn {
			t.Errorf("event %d: warnings %v", i, ws)
		}
	}
}
