package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stall=D: after phase_start and the transcript's init line nothing is
// written for D (no event, no transcript line); then the agent writes
// again and the phase passes. A redispatched plan does not stall.
func TestStallIsSilenceThenWork(t *testing.T) {
	dir := newPlan(t, `name: stalls
phases:
  - id: a
    prompt: "[sim stall=1500ms checks=pass]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	evs := readEvents(t, dir, "stalls")
	assertTypes(t, evs, "plan_start", "phase_start:a", "phase_passed:a", "plan_completed")
	start, err := time.Parse(time.RFC3339Nano, evs[1]["ts"].(string))
	if err != nil {
		t.Fatal(err)
	}
	passed, _ := time.Parse(time.RFC3339Nano, evs[2]["ts"].(string))
	if gap := passed.Sub(start); gap < 1500*time.Millisecond {
		t.Errorf("phase_start to phase_passed %s, want at least the stall", gap)
	}
	files, _ := filepath.Glob(filepath.Join(stateDir(dir, "stalls"), "transcripts", "a-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("transcripts %v", files)
	}
	data, _ := os.ReadFile(files[0])
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 3 || !strings.Contains(lines[0], `"init"`) || !strings.Contains(lines[1], "works again after a stall of 1.5s") {
		t.Fatalf("transcript:\n%s", data)
	}

	re := newPlan(t, `name: stalls-re
phases:
  - id: a
    prompt: "[sim stall=1h checks=pass]"
    env:
      REDISPATCH: "1"
`)
	assertExit(t, runSim(t, re, nil, "conduct", "run", "plan.yaml"), 0)
	assertTypes(t, readEvents(t, re, "stalls-re"), "plan_start", "phase_start:a", "phase_passed:a", "plan_completed")
}
