package taskact

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"karvi-edda-temporal/canonical"
)

// A phase's transcripts in the order they were written are its attempts;
// a phase whose id begins another's ("test", "test-e2e") takes only its own.
func TestPhaseTranscript(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour)
	write := func(name, body string, at time.Time) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write("test-ffff0000.jsonl", "second\n", t0.Add(2*time.Minute))
	write("test-00001111.jsonl", "first\n", t0.Add(time.Minute))
	write("test-e2e-aaaabbbb.jsonl", "other phase\n", t0)
	write("test-e2e-ccccdddd.jsonl", "other phase\n", t0.Add(3*time.Minute))
	for attempt, want := range map[int]string{1: "first", 2: "second", 3: ""} {
		name, lines := phaseTranscript(dir, "test", attempt)
		got := ""
		if len(lines) > 0 {
			got = string(lines[0])
		}
		if got != want || (want == "") != (name == "") {
			t.Errorf("attempt %d: %q (%s), want %q", attempt, got, name, want)
		}
	}
	if name, _ := phaseTranscript(filepath.Join(dir, "missing"), "test", 1); name != "" {
		t.Errorf("a missing directory gave %s", name)
	}
}

func TestEndsSomething(t *testing.T) {
	ended := canonical.Event{AgentID: canonical.WorkflowAgent, Type: canonical.TypeTaskUpdate, Payload: []byte(`{"progress":100,"ended":"completed"}`)}
	status := canonical.Event{AgentID: canonical.WorkflowAgent, Type: canonical.TypeTaskUpdate, Payload: []byte(`{"progress":0,"status":"in_progress"}`)}
	done := canonical.Event{AgentID: canonical.WorkflowAgent, Type: canonical.TypeTaskDone}
	phaseDone := canonical.Event{AgentID: "implement", Type: canonical.TypeTaskDone}
	for _, c := range []struct {
		evs  []canonical.Event
		want bool
	}{
		{nil, false}, {[]canonical.Event{status}, false}, {[]canonical.Event{phaseDone}, false},
		{[]canonical.Event{status, ended}, true}, {[]canonical.Event{done}, true},
	} {
		if got := endsSomething(c.evs); got != c.want {
			t.Errorf("endsSomething(%v) = %v", c.evs, got)
		}
	}
}
