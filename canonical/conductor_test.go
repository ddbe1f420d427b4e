package canonical

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"karvi-edda-temporal/mapping"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the code")

// exampleContext is the context a worker would give for the examples' run.
func exampleContext(name string) Context {
	return Context{
		RunID:              "karvi-T5-" + name,
		TaskID:             "T5",
		Plan:               "karvi-t5-020d01",
		File:               "testdata/examples/" + name + "/events.snake.jsonl",
		DefaultMaxAttempts: 3,
	}
}

// readExample parses an example's events, each positioned at the byte
// offset of its line as the tailer would.
func readExample(t testing.TB, name string) []mapping.Event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "examples", name, "events.snake.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var evs []mapping.Event
	var off int64
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			ev, err := mapping.ParseEvent(line)
			if err != nil {
				t.Fatalf("%s at %d: %v", name, off, err)
			}
			ev.Pos = mapping.Position{Offset: off}
			evs = append(evs, ev)
		}
		off += int64(len(line))
	}
	return evs
}

// TestGolden maps each example through FromConductor, a Stream (Follow
// and Validate) and Redact
// and compares the result with testdata/golden. Every event must validate;
// the warnings are part of what is checked.
func TestGolden(t *testing.T) {
	wantWarnings := map[string][]string{
		"A": nil,
		// The last attempt's failure goes from running to failed; the
		// table only knows failed after error, so Follow puts error before.
		"B": nil,
	}
	for _, name := range []string{"A", "B"} {
		t.Run(name, func(t *testing.T) {
			var s Stream
			var buf bytes.Buffer
			var warnings []string
			for i, ev := range readExample(t, name) {
				c, warns := FromConductor(ev, exampleContext(name))
				for _, f := range s.Follow(c) {
					v, vw, err := s.Validate(f)
					if err != nil {
						t.Fatalf("event %d (%s) does not validate: %v", i, ev.Type, err)
					}
					for _, w := range append(warns, vw...) {
						warnings = append(warnings, fmt.Sprintf("%d %s", i, w))
					}
					warns = nil
					line, err := json.Marshal(Redact(v))
					if err != nil {
						t.Fatal(err)
					}
					buf.Write(line)
					buf.WriteByte('\n')
				}
			}
			if strings.Join(warnings, "\n") != strings.Join(wantWarnings[name], "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(wantWarnings[name], "\n"))
			}
			path := filepath.Join("testdata", "golden", name+".jsonl")
			if *update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s differs from the mapping (run with -update and review):\n%s", path, buf.Bytes())
			}
		})
	}
}

func TestFromConductorCases(t *testing.T) {
	cost := 0.5
	tests := []struct {
		name    string
		ev      mapping.Event
		ctx     Context
		agent   string
		role    Role
		state   State
		typ     Type
		payload string
		warn    bool
	}{
		{"check failure with attempts left",
			mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "test", Attempt: 1, Error: "check failed: x"},
			Context{DefaultMaxAttempts: 3}, "test", RoleTester, StateRunning, TypeVerify,
			`{"result":"fail","reason":"check failed: x","attempt":1}`, false},
		{"agent failure with attempts left",
			mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "implement", Attempt: 1, Error: "agent crashed", ErrorType: "agent_error"},
			Context{MaxAttempts: map[string]int{"implement": 2}}, "implement", RoleExecutor, StateError, TypeError,
			`{"error_type":"agent_error","message":"agent crashed","attempt":1}`, false},
		{"last attempt",
			mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "docs", Attempt: 2, Error: "check failed: y"},
			Context{MaxAttempts: map[string]int{"docs": 2}, DefaultMaxAttempts: 9}, "docs", RoleWriter, StateFailed, TypeError,
			`{"error_type":"max_retry_exceeded","message":"check failed: y","attempt":2}`, false},
		{"budget unknown is never final",
			mapping.Event{Type: mapping.EventPhaseFailed, PhaseID: "review", Attempt: 7, Error: "check failed: z"},
			Context{}, "review", RoleReviewer, StateRunning, TypeVerify,
			`{"result":"fail","reason":"check failed: z","attempt":7}`, false},
		{"retry is a fix",
			mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "security-reviewer", Attempt: 2},
			Context{DefaultMaxAttempts: 3}, "security-reviewer", RoleGuard, StateRunning, TypeFix,
			`{"target":"security-reviewer","strategy":"retry, attempt 2 of 3","attempt":2}`, false},
		{"skipped",
			mapping.Event{Type: mapping.EventPhaseSkipped, PhaseID: "docs", Reason: "dependency failed"},
			Context{}, "docs", RoleWriter, StateCancelled, TypeTaskDone,
			`{"result":"cancelled","summary":"dependency failed"}`, false},
		{"aborted",
			mapping.Event{Type: mapping.EventPlanAborted, Reason: "phase test failed", PhasesPassed: 1, PhasesPending: 2},
			Context{}, ConductorAgent, RolePlanner, StateFailed, TypeError,
			`{"error_type":"plan_aborted","message":"phase test failed","phases_passed":1,"phases_pending":2}`, false},
		{"unknown type",
			mapping.Event{Type: "gate_entered", PhaseID: "Deploy.Prod"},
			Context{}, "Deploy-Prod", RoleCustom, StateRunning, TypeMessage,
			`{"message":"gate_entered","source_type":"gate_entered"}`, true},
		{"named agent",
			mapping.Event{Type: mapping.EventPhasePassed, PhaseID: "Code-Reviewer", Attempt: 1, CostUSD: &cost},
			Context{}, "Code-Reviewer", RoleReviewer, StateDone, TypeTaskDone,
			`{"result":"success","summary":"phase Code-Reviewer passed","attempt":1}`, false},
	}
	for _, tc := range tests {
		tc.ctx.TS = "2026-01-01T00:00:00Z"
		got, warns := FromConductor(tc.ev, tc.ctx)
		if got.AgentID != tc.agent || got.Role != tc.role || got.State != tc.state || got.Type != tc.typ ||
			string(got.Payload) != tc.payload || (len(warns) == 1) != tc.warn {
			t.Errorf("%s: got %s %s %s %s %s %v", tc.name, got.AgentID, got.Role, got.State, got.Type, got.Payload, warns)
		}
		if _, _, err := Validate(got); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestFromConductorContext(t *testing.T) {
	ev := mapping.Event{Type: mapping.EventPlanStart, Pos: mapping.Position{Gen: 2, Offset: 40}, PlanName: "my plan"}
	got, _ := FromConductor(ev, Context{File: "/var/run/a b/events.jsonl", TS: "2026-01-01T00:00:00Z", Parent: "karvi"})
	want := Event{TS: "2026-01-01T00:00:00Z", RunID: "run-unknown", Provider: ProviderSystem, Mode: ModePipeline,
		AgentID: ConductorAgent, ParentAgentID: "karvi", Role: RolePlanner, State: StateRunning, Type: TypeStateChange,
		IntentRef: "plan-my-plan", RawRef: "file:///var/run/a%20b/events.jsonl#gen=2&offset=40",
		Payload: json.RawMessage(`{"from":"idle","to":"running","trigger":"plan_start","plan_name":"my plan"}`)}
	if !sameEvent(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	got, _ = FromConductor(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "x", TS: "2026-01-02T00:00:00Z"},
		Context{RunID: "run-7", TaskID: "task-9", Plan: "p", File: "rel/events.jsonl"})
	if got.TS != "2026-01-02T00:00:00Z" || got.RunID != "run-7" || got.TaskID != "task-9" || got.RawRef != "file:rel/events.jsonl#offset=0" {
		t.Errorf("got %+v", got)
	}
	if _, _, err := Validate(got); err != nil {
		t.Error(err)
	}
}
