package main

import (
	"bufio"
	"encoding/json"
	"karvi-edda-temporal/testkit/wait"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The behaviours below are the real edda conductor's, as measured; the
// runtime's logic depends on each.

// Every agent call's cost reaches state.json's total before the checks
// run; phase_failed carries no cost.
func TestCostOfFailedAttemptsIsInStateNotEvents(t *testing.T) {
	dir := newPlan(t, `name: cost-fail
max_attempts: 2
phases:
  - id: a
    prompt: "[sim fail cost=0.25]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	st := readPlanState(t, dir, "cost-fail")
	if st.TotalCostUSD != 0.5 {
		t.Errorf("total_cost_usd = %v, want 0.5 (two attempts)", st.TotalCostUSD)
	}
	for _, e := range readEvents(t, dir, "cost-fail") {
		if _, has := e["cost_usd"]; has && e.str("type") == "phase_failed" {
			t.Errorf("phase_failed carries a cost: %v", e)
		}
	}
}

// A blocked plan's state.json keeps plan_status "pending"; its phases say
// what happened.
func TestBlockedPlanStaysPending(t *testing.T) {
	dir := newPlan(t, `name: blocked-pending
max_attempts: 1
phases:
  - id: a
    prompt: "[sim fail]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	st := readPlanState(t, dir, "blocked-pending")
	if st.PlanStatus != planPending || mustPhase(t, st, "a").Status != phaseFailed {
		t.Errorf("plan %q, a %q; want pending + failed", st.PlanStatus, mustPhase(t, st, "a").Status)
	}
}

// A timed-out phase is stale, not retried, and blocks the plan at once.
func TestTimeoutIsStaleAndNotRetried(t *testing.T) {
	dir := newPlan(t, `name: timed-out
max_attempts: 3
phases:
  - id: a
    prompt: "[sim timeout]"
  - id: b
    depends_on: [a]
    prompt: "x"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	st := readPlanState(t, dir, "timed-out")
	if a := mustPhase(t, st, "a"); a.Status != phaseStale || a.Attempts != 1 {
		t.Errorf("phase a = %+v, want stale after one attempt", a)
	}
	if st.PlanStatus != planPending {
		t.Errorf("plan_status %q, want pending", st.PlanStatus)
	}
}

// `conduct run` of an existing plan stops at a failed phase until
// `conduct retry` resets it.
func TestRerunStopsAtFailedPhaseUntilRetry(t *testing.T) {
	dir := newPlan(t, `name: rerun-failed
max_attempts: 1
phases:
  - id: a
    prompt: "[sim fail=1]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)
	if !strings.Contains(res.stdout, `Plan blocked: phase "a"`) {
		t.Errorf("rerun said %q", res.stdout)
	}
	if n := len(readEvents(t, dir, "rerun-failed")); n != 3 {
		t.Fatalf("rerun ran something: %d events", n)
	}
	assertExit(t, runSim(t, dir, nil, "conduct", "retry", "a"), 0)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	if st := readPlanState(t, dir, "rerun-failed"); st.PlanStatus != planCompleted {
		t.Errorf("after retry: plan %q", st.PlanStatus)
	}
}

// A phase a killed conductor left running is left alone: a new run does
// nothing within its timeout, and after it says the phase is stale
// without saving that; retry and skip refuse a running phase. The plan
// cannot be continued through the CLI.
func TestPhaseOfAKilledConductorIsLeftRunning(t *testing.T) {
	dir := newPlan(t, `name: killed
phases:
  - id: a
    prompt: "[sim hang=forever]"
    timeout_sec: 1
`)
	cmd, _ := startSim(t, dir, nil, "conduct", "run", "plan.yaml")
	waitForEvent(t, dir, "killed", isType("phase_start", "a"))
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	if a := mustPhase(t, readPlanState(t, dir, "killed"), "a"); a.Status != phaseRunning {
		t.Fatalf("phase a = %q, want left running", a.Status)
	}
	if res := runSim(t, dir, nil, "conduct", "retry", "a"); res.code == 0 {
		t.Errorf("retry of a running phase accepted: %q", res.stdout)
	}
	if res := runSim(t, dir, nil, "conduct", "skip", "a"); res.code == 0 {
		t.Errorf("skip of a running phase accepted: %q", res.stdout)
	}
	// Past its timeout (1 s after it started) a run calls it stale but
	// saves nothing.
	wait.EventuallyEvery(t, safetyNet, 10*time.Millisecond, "a run to call phase a stale", func() (any, bool) {
		res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
		return res.stdout, strings.Contains(res.stdout, `Plan blocked: phase "a" is Some(Stale)`)
	})
	if a := mustPhase(t, readPlanState(t, dir, "killed"), "a"); a.Status != phaseRunning {
		t.Errorf("phase a = %q, want still running on disk", a.Status)
	}
	if n := len(readEvents(t, dir, "killed")); n != 2 {
		t.Errorf("%d events, want plan_start and phase_start only", n)
	}
}

// SIGINT is graceful whatever the attempts left: phase_failed "conductor
// shutdown", the phase back to pending, exit 0; a later run continues.
func TestSIGINTPutsThePhaseBackEvenOnItsLastAttempt(t *testing.T) {
	dir := newPlan(t, `name: int-last
max_attempts: 1
phases:
  - id: a
    prompt: "[sim hang=forever]"
`)
	cmd, out := startSim(t, dir, nil, "conduct", "run", "plan.yaml")
	waitForEvent(t, dir, "int-last", isType("phase_start", "a"))
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if a := mustPhase(t, readPlanState(t, dir, "int-last"), "a"); a.Status != phasePending {
		t.Errorf("phase a = %+v, want pending", a)
	}
}

// SIGTERM is abrupt: the phase stays running in state.json.
func TestSIGTERMLeavesThePhaseRunning(t *testing.T) {
	dir := newPlan(t, `name: term
phases:
  - id: a
    prompt: "[sim hang=forever]"
`)
	cmd, _ := startSim(t, dir, nil, "conduct", "run", "plan.yaml")
	waitForEvent(t, dir, "term", isType("phase_start", "a"))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code == 0 {
		t.Fatal("SIGTERM was handled")
	}
	if a := mustPhase(t, readPlanState(t, dir, "term"), "a"); a.Status != phaseRunning {
		t.Errorf("phase a = %q, want running", a.Status)
	}
	assertTypes(t, readEvents(t, dir, "term"), "plan_start", "phase_start:a")
}

// One transcript per phase attempt, named <phase>-<first 8 of the session
// id>.jsonl, holding the agent's stream-json with a result line that
// carries its cost, usage and text.
func TestTranscriptPerAttempt(t *testing.T) {
	dir := newPlan(t, `name: transcribed
phases:
  - id: build-it
    prompt: "[sim fail=1 cost=0.125]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	files, _ := filepath.Glob(filepath.Join(stateDir(dir, "transcribed"), "transcripts", "*.jsonl"))
	if len(files) != 2 {
		t.Fatalf("transcripts %v, want one per attempt (2)", files)
	}
	for _, f := range files {
		base := filepath.Base(f)
		if !strings.HasPrefix(base, "build-it-") || len(strings.TrimSuffix(strings.TrimPrefix(base, "build-it-"), ".jsonl")) != 8 {
			t.Errorf("transcript name %q", base)
		}
		types := []string{}
		var result map[string]any
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: %v", base, err)
			}
			typ, _ := m["type"].(string)
			types = append(types, typ)
			if typ == "result" {
				result = m
			}
		}
		fh.Close()
		if strings.Join(types, ",") != "system,assistant,result" {
			t.Errorf("%s: types %v", base, types)
		}
		if result == nil || result["total_cost_usd"] != 0.125 || result["usage"] == nil || result["result"] == nil {
			t.Errorf("%s: result %v", base, result)
		}
	}
}

// An `orphan` agent leaves a process of its own behind, in the
// conductor's process group, which a timeout does not stop.
func TestOrphanOutlivesTheConductor(t *testing.T) {
	dir := newPlan(t, `name: leaves
phases:
  - id: a
    prompt: "[sim orphan timeout]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	data, err := os.ReadFile(filepath.Join(stateDir(dir, "leaves"), "left-a.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if pid <= 0 || processGone(pid) {
		t.Fatalf("left-behind process %d not running", pid)
	}
	if a := mustPhase(t, readPlanState(t, dir, "leaves"), "a"); a.Status != phaseStale {
		t.Errorf("phase a = %q, want stale", a.Status)
	}
}

// A usage limit is success-shaped, as Claude Code's: the transcript holds
// a rejected rate_limit_event with resetsAt and a result with subtype
// success, is_error true and api_error_status 429; the checks then fail
// and every attempt is spent at once on the limit; after the reset, a
// retry and a new run complete the plan.
func TestUsageLimitIsSuccessShapedAndLastsUntilItsReset(t *testing.T) {
	dir := newPlan(t, `name: limited
max_attempts: 3
phases:
  - id: a
    prompt: "[sim limit resets=1s]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	st := readPlanState(t, dir, "limited")
	if a := mustPhase(t, st, "a"); a.Status != phaseFailed || a.Attempts != 3 {
		t.Fatalf("phase a = %+v, want failed after 3 attempts", a)
	}
	if st.TotalCostUSD != 0 {
		t.Errorf("total_cost_usd = %v, want 0", st.TotalCostUSD)
	}
	files, _ := filepath.Glob(filepath.Join(stateDir(dir, "limited"), "transcripts", "a-*.jsonl"))
	if len(files) != 3 {
		t.Fatalf("transcripts %v, want 3", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var sawEvent, sawResult bool
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		switch m["type"] {
		case "rate_limit_event":
			info, _ := m["rate_limit_info"].(map[string]any)
			reset, _ := info["resetsAt"].(float64)
			sawEvent = info["status"] == "rejected" && reset > 0
		case "result":
			text, _ := m["result"].(string)
			sawResult = m["subtype"] == "success" && m["is_error"] == true && m["api_error_status"] == 429.0 &&
				strings.HasPrefix(text, "You've hit your limit · resets ")
		}
	}
	if !sawEvent || !sawResult {
		t.Fatalf("transcript lacks the limit's signs:\n%s", data)
	}
	time.Sleep(2 * time.Second) // past the reset
	assertExit(t, runSim(t, dir, nil, "conduct", "retry", "a"), 0)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	if st := readPlanState(t, dir, "limited"); st.PlanStatus != planCompleted {
		t.Errorf("after the reset: plan %q", st.PlanStatus)
	}
}

// With `limit=pass` (a phase without checks, or whose checks hold) the
// limited phase passes at cost 0 with no work done, as with edda.
func TestUsageLimitPassesACheckLessPhase(t *testing.T) {
	dir := newPlan(t, `name: limited-pass
phases:
  - id: a
    prompt: "[sim limit=pass resets=1m]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	st := readPlanState(t, dir, "limited-pass")
	if st.PlanStatus != planCompleted || st.TotalCostUSD != 0 {
		t.Errorf("plan %q cost %v, want completed at 0", st.PlanStatus, st.TotalCostUSD)
	}
}

// `limit=codex` writes the Codex CLI's turn.failed line and crashes;
// `limit=crash` puts the limit's text in phase_failed's error.
func TestUsageLimitCodexAndCrashForms(t *testing.T) {
	dir := newPlan(t, `name: limited-codex
max_attempts: 1
phases:
  - id: a
    prompt: "[sim limit=codex resets=1m]"
  - id: b
    prompt: "[sim limit=crash resets=1m]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	files, _ := filepath.Glob(filepath.Join(stateDir(dir, "limited-codex"), "transcripts", "a-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("transcripts %v", files)
	}
	data, _ := os.ReadFile(files[0])
	if !strings.Contains(string(data), `"type":"turn.failed"`) || !strings.Contains(string(data), "You've hit your usage limit") {
		t.Errorf("codex transcript:\n%s", data)
	}
	var failed []string
	for _, e := range readEvents(t, dir, "limited-codex") {
		if e.str("type") == "phase_failed" {
			failed = append(failed, e.str("error"))
		}
	}
	if len(failed) != 1 || failed[0] != "agent exited with code 1 without result" {
		t.Errorf("phase_failed errors %q", failed)
	}
	dir = newPlan(t, `name: limited-crash
max_attempts: 1
phases:
  - id: b
    prompt: "[sim limit=crash resets=1m]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	evs := readEvents(t, dir, "limited-crash")
	last := evs[len(evs)-1]
	if last.str("type") != "phase_failed" || !strings.HasPrefix(last.str("error"), "You've hit your usage limit.") {
		t.Errorf("last event %v", last)
	}
}
