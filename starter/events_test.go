package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func streamLines(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile("../workflows/taskflow/testdata/streams/" + name + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// One aligned line per event: time, state, type, role/agent, what happened.
func TestEventLines(t *testing.T) {
	lines := streamLines(t, "B")
	want := map[int]string{
		0:  "03:00:00.000  running    state_change  planner/workflow        idle → running (task_started): Add user authentication with JWT.",
		1:  "03:00:00.000  running    task_spawn    planner/workflow        attempt 1: plan karvi-t5-020d01 → conductor",
		2:  "03:00:00.000  running    task_update   planner/workflow        task dispatched",
		5:  "03:02:00.000  done       task_done     executor/implement      success: phase implement passed · $0.85 · 1m59s",
		7:  "03:03:05.000  running    verify        tester/test             fail: check failed: cmd `cargo test` exited 1 · 1m0s",
		8:  "03:03:10.000  running    fix           tester/test             test: retry, attempt 2 of 3",
		11: "03:05:00.000  error      state_change  tester/test             running → error (implied)",
		12: "03:05:00.000  failed     error         tester/test             max_retry_exceeded: check failed: cmd `cargo test` exited 1 · 50s",
		13: "03:00:02.000  blocked    task_done     planner/workflow        failure: Phase test failed: cmd `cargo test` exited 1",
	}
	for i, w := range want {
		if got := eventLine(lines[i], false, time.UTC); got != w {
			t.Errorf("line %d:\n got %q\nwant %q", i, got, w)
		}
	}
	// Every column starts where the one above it does.
	for _, name := range []string{"A", "B"} {
		for i, l := range streamLines(t, name) {
			got := eventLine(l, false, time.UTC)
			if r := []rune(got); len(r) < 64 || r[12] != ' ' || r[24] != ' ' || r[38] != ' ' || r[62] != ' ' || r[63] == ' ' {
				t.Errorf("%s line %d is not aligned: %q", name, i, got)
			}
		}
	}
	// The time is shown in the reader's zone.
	if got := eventLine(lines[0], false, time.FixedZone("KST", 9*3600)); !strings.HasPrefix(got, "12:00:00.000 ") {
		t.Errorf("zone: %q", got)
	}
}

func TestEventLineColoursOnlyWhenAsked(t *testing.T) {
	l := streamLines(t, "A")[5]
	plain, colored := eventLine(l, false, time.UTC), eventLine(l, true, time.UTC)
	if strings.Contains(plain, "\x1b") {
		t.Errorf("plain line has escape codes: %q", plain)
	}
	if !strings.Contains(colored, ansiGreen+"done     "+ansiReset) {
		t.Errorf("done is not green: %q", colored)
	}
}

// -json prints each event exactly as stored, so the bytes printed are the
// stream's bytes and their count is the next -since.
func TestEventsJSONPrintsAsStored(t *testing.T) {
	data, err := os.ReadFile("../workflows/taskflow/testdata/streams/A.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o := eventsOptions{JSON: true}
	for _, l := range streamLines(t, "A") {
		if err := o.print(&out, l); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Errorf("-json output differs from the stream")
	}
}

func TestEventLineOfOddInput(t *testing.T) {
	if got := eventLine("not json", false, time.UTC); got != "not json" {
		t.Errorf("%q", got)
	}
	long := `{"ts":"2026-02-28T03:00:00Z","run_id":"run-T5","provider":"system","agent_id":"a","role":"custom","state":"running","type":"message","payload":{"message":"` +
		strings.Repeat("word\\n", 100) + `"}}`
	got := eventLine(long, false, time.UTC)
	if strings.Contains(got, "\n") || utf8.RuneCountInString(got) > 64+whatRunes+1 || !strings.HasSuffix(got, "…") {
		t.Errorf("a long message is not one short line: %q", got)
	}
}
