package main

import (
	"encoding/json"
	"fmt"
	"karvi-edda-temporal/testkit/wait"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// threePhases is the shape of examples A and B: test and docs both depend
// on implement, so edda's id order runs docs before test.
const threePhases = `name: karvi-t5
purpose: "Add user authentication with JWT."
max_attempts: 3
tags: ["karvi:T5"]
phases:
  - id: implement
    prompt: "implement it"
  - id: test
    depends_on: [implement]
    prompt: "test it %s"
  - id: docs
    depends_on: [implement]
    prompt: "document it"
`

func TestPassThreePhases(t *testing.T) {
	dir := newPlan(t, strings.Replace(threePhases, "%s", "", 1))
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)

	events := readEvents(t, dir, "karvi-t5")
	assertTypes(t, events, "plan_start",
		"phase_start:implement", "phase_passed:implement",
		"phase_start:docs", "phase_passed:docs",
		"phase_start:test", "phase_passed:test",
		"plan_completed")
	assertSeqFromZero(t, events)
	if events[0].str("plan_name") != "karvi-t5" || events[0].num("phase_count") != 3 {
		t.Errorf("plan_start = %v", events[0])
	}
	passed := events[2]
	if passed.num("attempt") != 1 || passed.num("cost_usd") != defaultCost {
		t.Errorf("phase_passed = %v", passed)
	}
	if _, ok := passed["duration_ms"].(float64); !ok {
		t.Errorf("phase_passed has no duration_ms: %v", passed)
	}
	last := events[len(events)-1]
	if last.num("phases_passed") != 3 || last.num("total_cost_usd") < 0.29 || last.num("total_cost_usd") > 0.31 {
		t.Errorf("plan_completed = %v", last)
	}

	st := readPlanState(t, dir, "karvi-t5")
	if st.PlanStatus != planCompleted || st.StartedAt == nil || st.CompletedAt == nil {
		t.Errorf("state = %+v", st)
	}
	if st.PlanFile != "plan.yaml" {
		t.Errorf("plan_file = %q, want the path as given", st.PlanFile)
	}
	for _, ps := range st.Phases {
		if ps.Status != phasePassed || ps.Attempts != 1 || ps.StartedAt == nil || ps.CompletedAt == nil {
			t.Errorf("phase %+v", ps)
		}
	}
	var rs runnerStatus
	data, err := os.ReadFile(filepath.Join(stateDir(dir, "karvi-t5"), "runner-status.json"))
	if err != nil || json.Unmarshal(data, &rs) != nil || rs.Status != planCompleted || len(rs.Completed) != 3 {
		t.Errorf("runner-status.json = %s (%v)", data, err)
	}
}

func TestFailTwiceThenPass(t *testing.T) {
	dir := newPlan(t, strings.Replace(threePhases, "%s", "[sim fail=2]", 1))
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)

	events := readEvents(t, dir, "karvi-t5")
	assertTypes(t, events, "plan_start",
		"phase_start:implement", "phase_passed:implement",
		"phase_start:docs", "phase_passed:docs",
		"phase_start:test", "phase_failed:test",
		"phase_start:test", "phase_failed:test",
		"phase_start:test", "phase_passed:test",
		"plan_completed")
	for i, idx := range []int{5, 7, 9} {
		if got := events[idx].num("attempt"); int(got) != i+1 {
			t.Errorf("phase_start #%d attempt = %v", i+1, got)
		}
	}
	failed := events[6]
	if failed.str("error_type") != errCheckFailed || !strings.HasPrefix(failed.str("error"), "exit 1: ") {
		t.Errorf("phase_failed = %v", failed)
	}
	ps := mustPhase(t, readPlanState(t, dir, "karvi-t5"), "test")
	if ps.Status != phasePassed || ps.Attempts != 3 {
		t.Errorf("test phase = %+v", ps)
	}
}

func TestFailAlwaysBlocks(t *testing.T) {
	dir := newPlan(t, `name: fail-always
max_attempts: 2
phases:
  - id: a
    prompt: "[sim fail error=\"tests are red\"]"
  - id: b
    depends_on: [a]
    prompt: "never runs"
`)
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)

	events := readEvents(t, dir, "fail-always")
	assertTypes(t, events, "plan_start", "phase_start:a", "phase_failed:a", "phase_start:a", "phase_failed:a")
	if events[4].str("error") != "tests are red" {
		t.Errorf("error = %q", events[4].str("error"))
	}
	st := readPlanState(t, dir, "fail-always")
	if st.PlanStatus != planPending {
		t.Errorf("plan_status = %q, want pending (edda never saves blocked)", st.PlanStatus)
	}
	a := mustPhase(t, st, "a")
	if a.Status != phaseFailed || a.Attempts != 2 || a.Error == nil || a.Error.ErrorType != errCheckFailed || a.Error.Message != "tests are red" {
		t.Errorf("phase a = %+v error %+v", a, a.Error)
	}
	if len(a.Checks) != 1 || a.Checks[0].Status != "failed" {
		t.Errorf("checks = %+v", a.Checks)
	}
	if mustPhase(t, st, "b").Status != phasePending {
		t.Errorf("phase b ran")
	}
	if !strings.Contains(res.stdout, "failed after 2 attempts") {
		t.Errorf("stdout lacks the blocked notice:\n%s", res.stdout)
	}
}

func TestCrashIsRetried(t *testing.T) {
	dir := newPlan(t, `name: crashy
phases:
  - id: a
    prompt: "[sim crash=1]"
`)
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)
	if want := `eddasim: agent of phase "a" crashed (attempt 1): eddasim: simulated agent crash (attempt 1)` + "\n"; res.stderr != want {
		t.Errorf("stderr = %q, want %q", res.stderr, want)
	}
	events := readEvents(t, dir, "crashy")
	assertTypes(t, events, "plan_start", "phase_start:a", "phase_failed:a", "phase_start:a", "phase_passed:a", "plan_completed")
	if events[2].str("error_type") != errAgentCrash {
		t.Errorf("phase_failed = %v", events[2])
	}
	a := mustPhase(t, readPlanState(t, dir, "crashy"), "a")
	if a.Status != phasePassed || a.Attempts != 2 {
		t.Errorf("phase a = %+v", a)
	}
}

func TestDieLeavesStateRunning(t *testing.T) {
	dir := newPlan(t, `name: dies
phases:
  - id: a
    prompt: "ok"
  - id: b
    depends_on: [a]
    prompt: "[sim die]"
`)
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, dieExitCode)
	// The one line a person reading the crash reason needs, on stderr
	// where a program says what went wrong; stdout has the events.
	if want := `eddasim: simulated conductor crash in phase "b" (attempt 1)` + "\n"; res.stderr != want {
		t.Errorf("stderr = %q, want %q", res.stderr, want)
	}
	events := readEvents(t, dir, "dies")
	assertTypes(t, events, "plan_start", "phase_start:a", "phase_passed:a", "phase_start:b")
	st := readPlanState(t, dir, "dies")
	if st.PlanStatus != planRunning || mustPhase(t, st, "b").Status != phaseRunning {
		t.Errorf("state after die: plan %q, b %q", st.PlanStatus, mustPhase(t, st, "b").Status)
	}
}

// A phase left running by a dead conductor is not marked stale on resume,
// even past its timeout (timeout_sec 0): edda says the plan is blocked by
// it and saves nothing; nothing is re-run.
func TestResumeAfterDieLeavesThePhaseRunning(t *testing.T) {
	dir := newPlan(t, `name: dies-then-resumes
phases:
  - id: a
    timeout_sec: 0
    prompt: "[sim die]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), dieExitCode)
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)
	if !strings.Contains(res.stdout, `Plan blocked: phase "a" is Some(Stale)`) {
		t.Errorf("stdout %q", res.stdout)
	}
	assertTypes(t, readEvents(t, dir, "dies-then-resumes"), "plan_start", "phase_start:a")
	st := readPlanState(t, dir, "dies-then-resumes")
	if a := mustPhase(t, st, "a"); a.Status != phaseRunning || a.Error != nil {
		t.Errorf("plan %q, phase %+v", st.PlanStatus, a)
	}
}

func TestHangObeysPhaseTimeout(t *testing.T) {
	dir := newPlan(t, `name: hangs
phases:
  - id: a
    timeout_sec: 1
    prompt: "[sim hang]"
  - id: b
    depends_on: [a]
    prompt: "never"
`)
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)
	assertStaleBlocked(t, dir, "hangs")
}

func TestTimeoutDirective(t *testing.T) {
	dir := newPlan(t, `name: times-out
phases:
  - id: a
    prompt: "[sim timeout]"
  - id: b
    depends_on: [a]
    prompt: "never"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	assertStaleBlocked(t, dir, "times-out")
}

func assertStaleBlocked(t *testing.T, dir, plan string) {
	t.Helper()
	events := readEvents(t, dir, plan)
	assertTypes(t, events, "plan_start", "phase_start:a", "phase_failed:a")
	if events[2].str("error") != "timed out" || events[2].str("error_type") != errTimeout {
		t.Errorf("phase_failed = %v", events[2])
	}
	st := readPlanState(t, dir, plan)
	a := mustPhase(t, st, "a")
	if st.PlanStatus != planPending || a.Status != phaseStale || a.Attempts != 1 || a.Error == nil || a.Error.Message != `phase "a" timed out` {
		t.Errorf("plan %q, phase %+v, error %+v", st.PlanStatus, a, a.Error)
	}
}

func TestBudgetBlocksWithoutTerminalEvent(t *testing.T) {
	dir := newPlan(t, `name: over-budget
phases:
  - id: a
    prompt: "[sim budget cost=1]"
  - id: b
    depends_on: [a]
    prompt: "never"
`)
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)
	if !strings.Contains(res.stderr, "BudgetExceeded { cost_usd: Some(1.0) }") {
		t.Errorf("stderr = %q", res.stderr)
	}
	events := readEvents(t, dir, "over-budget")
	assertTypes(t, events, "plan_start", "phase_start:a", "phase_failed:a")
	if events[2].str("error_type") != errBudgetExceeded {
		t.Errorf("phase_failed = %v", events[2])
	}
	st := readPlanState(t, dir, "over-budget")
	a := mustPhase(t, st, "a")
	if st.PlanStatus != planPending || a.Status != phaseFailed || a.Attempts != 1 || a.Error.ErrorType != errBudgetExceeded || a.Error.Retryable {
		t.Errorf("plan %q, phase %+v, error %+v", st.PlanStatus, a, a.Error)
	}
	if st.TotalCostUSD != 1 {
		t.Errorf("total_cost_usd = %v, want the reported 1", st.TotalCostUSD)
	}
}

// A plan budget_usd that is used up stops the loop: no event, exit 0.
func TestPlanBudgetExhaustedStopsLoop(t *testing.T) {
	dir := newPlan(t, `name: plan-budget
budget_usd: 0.15
purpose: "[sim cost=0.1]"
phases:
  - id: a
    prompt: "x"
  - id: b
    prompt: "x"
  - id: c
    prompt: "x"
`)
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)
	assertTypes(t, readEvents(t, dir, "plan-budget"), "plan_start", "phase_start:a", "phase_passed:a", "phase_start:b", "phase_passed:b")
	if !strings.Contains(res.stdout, "budget exhausted") {
		t.Errorf("stdout lacks the budget notice:\n%s", res.stdout)
	}
	if mustPhase(t, readPlanState(t, dir, "plan-budget"), "c").Status != phasePending {
		t.Error("phase c ran past the budget")
	}
}

func TestSkipDirective(t *testing.T) {
	dir := newPlan(t, strings.Replace(threePhases, "%s", `[sim skip reason=\"not needed\"]`, 1))
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	events := readEvents(t, dir, "karvi-t5")
	assertTypes(t, events, "plan_start",
		"phase_start:implement", "phase_passed:implement",
		"phase_start:docs", "phase_passed:docs",
		"phase_skipped:test", "plan_completed")
	if events[5].str("reason") != "not needed" {
		t.Errorf("phase_skipped = %v", events[5])
	}
	if events[6].num("phases_passed") != 2 {
		t.Errorf("plan_completed = %v", events[6])
	}
	st := readPlanState(t, dir, "karvi-t5")
	ps := mustPhase(t, st, "test")
	if st.PlanStatus != planCompleted || ps.Status != phaseSkipped || ps.SkipReason == nil || *ps.SkipReason != "not needed" || ps.Attempts != 0 {
		t.Errorf("plan %q, test %+v", st.PlanStatus, ps)
	}
	// completedPhases in the brief counts passed + skipped.
	if st.count(phasePassed)+st.count(phaseSkipped) != 3 {
		t.Errorf("passed+skipped = %d", st.count(phasePassed)+st.count(phaseSkipped))
	}
}

func TestOnFailPolicies(t *testing.T) {
	const plan = `name: policy
on_fail: %s
phases:
  - id: a
    prompt: "[sim fail]"
  - id: b
    prompt: "ok"
`
	t.Run("skip", func(t *testing.T) {
		dir := newPlan(t, strings.Replace(plan, "%s", "skip", 1))
		assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
		events := readEvents(t, dir, "policy")
		assertTypes(t, events, "plan_start", "phase_start:a", "phase_failed:a", "phase_skipped:a", "phase_start:b", "phase_passed:b", "plan_completed")
		if events[3].str("reason") != "auto-skipped by on_fail policy" {
			t.Errorf("phase_skipped = %v", events[3])
		}
		if readPlanState(t, dir, "policy").PlanStatus != planCompleted {
			t.Error("plan not completed")
		}
	})
	t.Run("abort", func(t *testing.T) {
		dir := newPlan(t, strings.Replace(plan, "%s", "abort", 1))
		assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
		events := readEvents(t, dir, "policy")
		assertTypes(t, events, "plan_start", "phase_start:a", "phase_failed:a", "plan_aborted")
		if events[3].num("phases_passed") != 0 || events[3].num("phases_pending") != 1 {
			t.Errorf("plan_aborted = %v", events[3])
		}
		st := readPlanState(t, dir, "policy")
		if st.PlanStatus != planAborted || st.AbortedAt == nil {
			t.Errorf("state = %+v", st)
		}
	})
}

func TestDelay(t *testing.T) {
	dir := newPlan(t, `name: slow
phases:
  - id: a
    prompt: "[sim delay=300ms]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	events := readEvents(t, dir, "slow")
	// A lower bound only: the agent sleeps at least the delay.
	if d := events[2].num("duration_ms"); d < 300 {
		t.Errorf("duration_ms = %v, want >= 300", d)
	}
}

func TestCostNull(t *testing.T) {
	dir := newPlan(t, `name: no-cost
purpose: "[sim cost=null]"
phases:
  - id: a
    prompt: "x"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	events := readEvents(t, dir, "no-cost")
	for _, e := range []event{events[2], events[3]} {
		key := "cost_usd"
		if e.str("type") == "plan_completed" {
			key = "total_cost_usd"
		}
		v, present := e[key]
		if !present || v != nil {
			t.Errorf("%s: %s = %v (present %v), want null", e.str("type"), key, v, present)
		}
	}
	st := readPlanState(t, dir, "no-cost")
	if st.CostMeasured || st.TotalCostUSD != 0 {
		t.Errorf("state cost = %v measured %v", st.TotalCostUSD, st.CostMeasured)
	}
}

func TestRealChecks(t *testing.T) {
	dir := newPlan(t, `name: real-checks
max_attempts: 1
phases:
  - id: a
    prompt: "x"
    check:
      - type: file_contains
        path: README.md
        pattern: "auth"
      - cmd_succeeds: "echo 'broken token=hunter2' >&2; exit 3"
      - file_exists: "never-checked"
`)
	writeFile(t, filepath.Join(dir, "README.md"), "# JWT auth middleware\n")
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)

	events := readEvents(t, dir, "real-checks")
	assertTypes(t, events, "plan_start", "phase_start:a", "phase_failed:a")
	if got, want := events[2].str("error"), "exit 3: broken token=[MASKED]"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	a := mustPhase(t, readPlanState(t, dir, "real-checks"), "a")
	var got []string
	for _, c := range a.Checks {
		got = append(got, c.CheckType+"="+c.Status)
	}
	if want := "file_contains=passed cmd_succeeds=failed file_exists=waiting"; strings.Join(got, " ") != want {
		t.Errorf("checks = %v, want %s", got, want)
	}
	if a.Error == nil || a.Error.CheckIndex == nil || *a.Error.CheckIndex != 1 || a.Error.ErrorType != errCheckFailed {
		t.Errorf("error = %+v", a.Error)
	}
}

func TestChecksPassOverridesRealFailure(t *testing.T) {
	dir := newPlan(t, `name: checks-pass
phases:
  - id: a
    prompt: "[sim checks=pass]"
    check:
      - cmd_succeeds: "exit 1"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	a := mustPhase(t, readPlanState(t, dir, "checks-pass"), "a")
	if a.Status != phasePassed || len(a.Checks) != 1 || a.Checks[0].Status != "passed" {
		t.Errorf("phase a = %+v", a)
	}
}

// EDDASIM_SCENARIO gives defaults (here: checks that pass) that a plan can
// still override, and can target one phase.
func TestScenarioEnv(t *testing.T) {
	dir := newPlan(t, `name: env-scenario
max_attempts: 1
phases:
  - id: a
    prompt: "x"
    check:
      - cmd_succeeds: "exit 1"
  - id: b
    depends_on: [a]
    prompt: "x"
`)
	env := []string{scenarioEnv + "=checks=pass delay=1ms; phase=b fail=always"}
	assertExit(t, runSim(t, dir, env, "conduct", "run", "plan.yaml"), 0)
	st := readPlanState(t, dir, "env-scenario")
	if mustPhase(t, st, "a").Status != phasePassed || mustPhase(t, st, "b").Status != phaseFailed {
		t.Errorf("a %q, b %q", mustPhase(t, st, "a").Status, mustPhase(t, st, "b").Status)
	}
}

func TestJSONEchoesEventLines(t *testing.T) {
	dir := newPlan(t, strings.Replace(threePhases, "%s", "", 1))
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml", "--json")
	assertExit(t, res, 0)
	// edda prints its human progress lines to stdout even with --json, so
	// consumers must pick out the JSON lines.
	var echoed []string
	for _, line := range strings.Split(res.stdout, "\n") {
		if strings.HasPrefix(line, "{") {
			echoed = append(echoed, line)
		}
	}
	data, err := os.ReadFile(filepath.Join(stateDir(dir, "karvi-t5"), "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSuffix(string(data), "\n"); strings.Join(echoed, "\n") != want {
		t.Errorf("stdout JSON lines differ from events.jsonl:\n%s\n---\n%s", strings.Join(echoed, "\n"), want)
	}
	if len(echoed) != 8 {
		t.Errorf("echoed %d lines, want 8", len(echoed))
	}
}

func TestEventsDirectiveMakesLongLogs(t *testing.T) {
	dir := newPlan(t, `name: chatty
phases:
  - id: a
    prompt: "[sim events=999 delay=20ms]"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	events := readEvents(t, dir, "chatty")
	if len(events) != 1003 {
		t.Fatalf("%d events, want 1003", len(events))
	}
	assertSeqFromZero(t, events)
	if events[1].str("type") != "phase_start" || events[1001].str("type") != "phase_passed" {
		t.Errorf("progress events are not inside the phase: %v ... %v", events[1], events[1001])
	}
	for i, e := range events[2:1001] {
		if e.str("type") != "agent_progress" || int(e.num("n")) != i+1 || e.str("phase_id") != "a" {
			t.Fatalf("event %d = %v", i+2, e)
		}
	}
}

// Only the phase's own env reaches its agent, as in edda: REDISPATCH set at
// plan level alone is lost.
func TestRedispatchEnvReachesEveryPhase(t *testing.T) {
	dir := newPlan(t, `name: redispatch
env:
  REDISPATCH: "1"
  PLAN_ONLY: "x"
phases:
  - id: a
    prompt: "x"
    env: {REDISPATCH: "1"}
  - id: b
    prompt: "x"
    env: {REDISPATCH: "1", OTHER: "y"}
  - id: c
    prompt: "x"
`)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	read := func(id string) map[string]string {
		data, err := os.ReadFile(filepath.Join(stateDir(dir, "redispatch"), "phase-env-"+id+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var env map[string]string
		if err := json.Unmarshal(data, &env); err != nil {
			t.Fatal(err)
		}
		return env
	}
	for _, id := range []string{"a", "b"} {
		if env := read(id); env["REDISPATCH"] != "1" || env["PLAN_ONLY"] != "" {
			t.Errorf("phase %s env = %v", id, env)
		}
	}
	if env := read("c"); len(env) != 0 {
		t.Errorf("phase c env = %v, want empty (plan env is not applied)", env)
	}
}

func TestResumeSkipsPassedPhases(t *testing.T) {
	const plan = `name: resumable
max_attempts: 1
phases:
  - id: a
    prompt: "x"
  - id: b
    depends_on: [a]
    prompt: "%s"
`
	dir := newPlan(t, strings.Replace(plan, "%s", "[sim fail]", 1))
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	first := len(readEvents(t, dir, "resumable"))

	// Fix the phase, reset it as an operator would, and run again.
	writeFile(t, filepath.Join(dir, "plan.yaml"), strings.Replace(plan, "%s", "fixed", 1))
	res := runSim(t, dir, nil, "conduct", "retry", "b", "--plan", "resumable")
	assertExit(t, res, 0)
	res = runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)
	if !strings.Contains(res.stdout, "Resuming plan") {
		t.Errorf("stdout = %q", res.stdout)
	}

	second := readEvents(t, dir, "resumable")[first:]
	assertTypes(t, second, "phase_start:b", "phase_passed:b", "plan_completed")
	assertSeqFromZero(t, second)
	if second[0].num("attempt") != 2 {
		t.Errorf("resumed attempt = %v, want 2", second[0]["attempt"])
	}
	st := readPlanState(t, dir, "resumable")
	if st.PlanStatus != planCompleted || mustPhase(t, st, "a").Attempts != 1 {
		t.Errorf("state %q, a attempts %d", st.PlanStatus, mustPhase(t, st, "a").Attempts)
	}
}

func TestCompletedRerunReemitsPlanCompleted(t *testing.T) {
	dir := newPlan(t, "name: done-twice\nphases:\n  - id: a\n    prompt: x\n")
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	events := readEvents(t, dir, "done-twice")
	assertTypes(t, events, "plan_start", "phase_start:a", "phase_passed:a", "plan_completed", "plan_completed")
	if events[4].num("seq") != 0 {
		t.Errorf("re-emitted plan_completed seq = %v, want 0", events[4]["seq"])
	}
}

func TestInvalidPlansAreRejected(t *testing.T) {
	cases := map[string]struct{ yaml, msg string }{
		"uppercase name":    {"name: karvi-T5\nphases:\n  - id: a\n    prompt: x\n", "kebab-case"},
		"no phases":         {"name: empty\nphases: []\n", "at least one phase"},
		"duplicate id":      {"name: dup\nphases:\n  - id: a\n    prompt: x\n  - id: a\n    prompt: y\n", "duplicate phase id"},
		"unknown dep":       {"name: dep\nphases:\n  - id: a\n    prompt: x\n    depends_on: [zz]\n", `depends on "zz"`},
		"cycle":             {"name: cyc\nphases:\n  - id: a\n    prompt: x\n    depends_on: [b]\n  - id: b\n    prompt: y\n    depends_on: [a]\n", "cycle"},
		"unknown check":     {"name: chk\nphases:\n  - id: a\n    prompt: x\n    check:\n      - magic: y\n", "unknown check type"},
		"missing prompt":    {"name: np\nphases:\n  - id: a\n", "prompt"},
		"unquoted env":      {"name: env\nphases:\n  - id: a\n    prompt: x\n    env: {REDISPATCH: 1}\n", "REDISPATCH"},
		"bad yaml":          {"name: [\n", "invalid YAML"},
		"unknown sim key":   {"name: sim\nphases:\n  - id: a\n    prompt: '[sim explode]'\n", "unknown key"},
		"sim unknown phase": {"name: sim\npurpose: '[sim phase=zz fail]'\nphases:\n  - id: a\n    prompt: x\n", "no such phase"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := newPlan(t, tc.yaml)
			res := runSim(t, dir, nil, "conduct", "run", "plan.yaml")
			assertExit(t, res, 1)
			if !strings.HasPrefix(res.stderr, "Error: ") || !strings.Contains(res.stderr, tc.msg) {
				t.Errorf("stderr = %q, want it to mention %q", res.stderr, tc.msg)
			}
			if _, err := os.Stat(filepath.Join(dir, ".edda")); !os.IsNotExist(err) {
				t.Errorf(".edda was created for an invalid plan (%v)", err)
			}
		})
	}
}

func TestLenientPlanFeatures(t *testing.T) {
	dir := newPlan(t, `name: lenient
future_key: ignored
phases:
  - id: a
    prompt: "x"
    unknown_phase_key: {nested: true}
    check:
      - file_exists: "${{ env.EDDASIM_TEST_FILE }}"
      - git_clean: true
      - edda_event: decision
`)
	writeFile(t, filepath.Join(dir, "marker.txt"), "")
	assertExit(t, runSim(t, dir, []string{"EDDASIM_TEST_FILE=marker.txt"}, "conduct", "run", "plan.yaml", "--json", "-q"), 0)
	a := mustPhase(t, readPlanState(t, dir, "lenient"), "a")
	// git_clean fails outside a repository: the short forms parsed and ran.
	if a.Status != phaseFailed || len(a.Checks) != 3 || a.Checks[0].Status != "passed" || a.Checks[1].CheckType != "git_clean" {
		t.Errorf("phase a = %+v", a)
	}
}

func TestAbortWhileHanging(t *testing.T) {
	dir := newPlan(t, `name: abort-hang
phases:
  - id: a
    prompt: "[sim hang=forever]"
  - id: b
    depends_on: [a]
    prompt: "x"
`)
	cmd, _ := startSim(t, dir, nil, "conduct", "run", "plan.yaml")
	waitForEvent(t, dir, "abort-hang", isType("phase_start", "a"))

	res := runSim(t, dir, nil, "conduct", "abort", "abort-hang")
	assertExit(t, res, 0)
	if !strings.Contains(res.stdout, `Plan "abort-hang" aborted.`) {
		t.Errorf("abort stdout = %q", res.stdout)
	}
	st := readPlanState(t, dir, "abort-hang")
	if st.PlanStatus != planAborted || st.AbortedAt == nil {
		t.Errorf("state after abort: %+v", st)
	}
	if cmd.ProcessState != nil {
		t.Fatal("abort stopped the conductor; it must only rewrite state.json")
	}
	// Stopping the process is the caller's job.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
	assertTypes(t, readEvents(t, dir, "abort-hang"), "plan_start", "phase_start:a")
	if readPlanState(t, dir, "abort-hang").PlanStatus != planAborted {
		t.Error("abort lost")
	}

	// A second abort and a re-run both see the aborted plan.
	assertExit(t, runSim(t, dir, nil, "conduct", "abort"), 1)
	res = runSim(t, dir, nil, "conduct", "run", "plan.yaml")
	assertExit(t, res, 0)
	assertTypes(t, readEvents(t, dir, "abort-hang"), "plan_start", "phase_start:a")
}

// The run notices an abort before its next phase and does not overwrite it.
// Phase a's check waits for a file, so the abort lands deterministically
// while a is still in progress.
func TestAbortNoticedBetweenPhases(t *testing.T) {
	dir := newPlan(t, `name: abort-between
phases:
  - id: a
    prompt: "x"
    check:
      - cmd_succeeds: "while [ ! -f release ]; do sleep 0.01; done"
  - id: b
    depends_on: [a]
    prompt: "x"
`)
	cmd, out := startSim(t, dir, nil, "conduct", "run", "plan.yaml")
	waitForEvent(t, dir, "abort-between", isType("phase_start", "a"))
	assertExit(t, runSim(t, dir, nil, "conduct", "abort"), 0)
	writeFile(t, filepath.Join(dir, "release"), "")
	if code := waitExit(t, cmd); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	events := readEvents(t, dir, "abort-between")
	assertTypes(t, events, "plan_start", "phase_start:a", "phase_passed:a")
	st := readPlanState(t, dir, "abort-between")
	if st.PlanStatus != planAborted || mustPhase(t, st, "a").Status != phasePassed || mustPhase(t, st, "b").Status != phasePending {
		t.Errorf("state = %q a=%q b=%q", st.PlanStatus, mustPhase(t, st, "a").Status, mustPhase(t, st, "b").Status)
	}
}

// strict reproduces edda's on-disk quirks: plan_status is left "pending"
// while a blocked run exits, and an abort is overwritten by the next save.
func TestStrictModeKeepsEddasOnDiskStatus(t *testing.T) {
	t.Run("blocked", func(t *testing.T) {
		dir := newPlan(t, `name: strict-block
purpose: "[sim strict]"
max_attempts: 1
phases:
  - id: a
    prompt: "[sim fail]"
`)
		assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
		st := readPlanState(t, dir, "strict-block")
		if st.PlanStatus != planPending || mustPhase(t, st, "a").Status != phaseFailed {
			t.Errorf("plan %q, a %q; want edda's pending + failed", st.PlanStatus, mustPhase(t, st, "a").Status)
		}
		var rs runnerStatus
		data, _ := os.ReadFile(filepath.Join(stateDir(dir, "strict-block"), "runner-status.json"))
		if json.Unmarshal(data, &rs) != nil || rs.Status != planBlocked {
			t.Errorf("runner-status.json = %s, want blocked", data)
		}
	})
	t.Run("abort overwritten", func(t *testing.T) {
		dir := newPlan(t, `name: strict-abort
purpose: "[sim strict]"
phases:
  - id: a
    prompt: "x"
    check:
      - cmd_succeeds: "while [ ! -f release ]; do sleep 0.01; done"
  - id: b
    depends_on: [a]
    prompt: "x"
`)
		cmd, _ := startSim(t, dir, nil, "conduct", "run", "plan.yaml")
		waitForEvent(t, dir, "strict-abort", isType("phase_start", "a"))
		assertExit(t, runSim(t, dir, nil, "conduct", "abort"), 0)
		writeFile(t, filepath.Join(dir, "release"), "")
		waitExit(t, cmd)
		st := readPlanState(t, dir, "strict-abort")
		if st.PlanStatus != planCompleted || mustPhase(t, st, "b").Status != phasePassed {
			t.Errorf("plan %q b %q; want the abort ignored as edda does", st.PlanStatus, mustPhase(t, st, "b").Status)
		}
	})
}

func TestSIGINTShutsDownGracefully(t *testing.T) {
	dir := newPlan(t, `name: interrupted
phases:
  - id: a
    prompt: "[sim hang=forever]"
`)
	cmd, out := startSim(t, dir, nil, "conduct", "run", "plan.yaml")
	waitForEvent(t, dir, "interrupted", isType("phase_start", "a"))
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	events := readEvents(t, dir, "interrupted")
	assertTypes(t, events, "plan_start", "phase_start:a", "phase_failed:a")
	if events[2].str("error") != "conductor shutdown" || events[2].str("error_type") != errAgentCrash {
		t.Errorf("phase_failed = %v", events[2])
	}
	if a := mustPhase(t, readPlanState(t, dir, "interrupted"), "a"); a.Status != phasePending || a.Attempts != 1 {
		t.Errorf("phase a = %+v, want pending for the next run", a)
	}
}

func TestChildAgentDiesWithProcessGroup(t *testing.T) {
	dir := newPlan(t, `name: with-child
phases:
  - id: a
    prompt: "[sim hang=forever child]"
`)
	cmd, _ := startSim(t, dir, nil, "conduct", "run", "plan.yaml")
	waitForEvent(t, dir, "with-child", isType("phase_start", "a"))
	pidFile := filepath.Join(stateDir(dir, "with-child"), "agent-a.pid")
	var childPid int
	wait.EventuallyEvery(t, safetyNet, 10*time.Millisecond, "the agent child's pid in "+pidFile, func() (any, bool) {
		data, err := os.ReadFile(pidFile)
		childPid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return fmt.Sprintf("%q (%v)", data, err), err == nil && childPid > 0
	})
	if pgid, err := syscall.Getpgid(childPid); err != nil || pgid != cmd.Process.Pid {
		t.Fatalf("agent child pgid %d (%v), want the conductor's group %d", pgid, err, cmd.Process.Pid)
	}
	if a := mustPhase(t, readPlanState(t, dir, "with-child"), "a"); a.Status != phaseRunning || a.Attempts != 1 {
		t.Fatalf("the agent child ended early: phase a = %+v", a)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
	wait.EventuallyEvery(t, safetyNet, 10*time.Millisecond, fmt.Sprintf("the agent child %d to exit", childPid), func() (any, bool) {
		return "still running", processGone(childPid)
	})
}

func TestStatusCommand(t *testing.T) {
	dir := newPlan(t, "name: shown\nphases:\n  - id: a\n    prompt: x\n")
	assertExit(t, runSim(t, dir, nil, "conduct", "run", "plan.yaml"), 0)
	sub := filepath.Join(dir, "nested", "deeper")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	res := runSim(t, sub, nil, "conduct", "status", "shown", "--json")
	assertExit(t, res, 0)
	var st PlanState
	if err := json.Unmarshal([]byte(res.stdout), &st); err != nil || st.PlanStatus != planCompleted {
		t.Errorf("status --json = %q (%v)", res.stdout, err)
	}
	res = runSim(t, dir, nil, "conduct", "status")
	assertExit(t, res, 0)
	if !strings.Contains(res.stdout, "Plan: shown (Completed)") {
		t.Errorf("status = %q", res.stdout)
	}
	res = runSim(t, dir, nil, "conduct", "status", "missing", "--json")
	if res.code != 0 || strings.TrimSpace(res.stdout) != "null" {
		t.Errorf("status of a missing plan = %q", res.stdout)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	dir := newPlan(t, strings.Replace(threePhases, "%s", "[sim fail=1]", 1))
	res := runSim(t, dir, nil, "conduct", "run", "plan.yaml", "--dry-run")
	assertExit(t, res, 0)
	if !strings.Contains(res.stdout, "1. implement") || !strings.Contains(res.stdout, "3. test") || !strings.Contains(res.stdout, "fail=1") {
		t.Errorf("dry-run output:\n%s", res.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, ".edda")); !os.IsNotExist(err) {
		t.Errorf("dry run wrote state (%v)", err)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{}, {"conduct"}, {"conduct", "fly"}, {"conduct", "run"}, {"conduct", "run", "p.yaml", "--bogus"}} {
		if res := runSim(t, dir, nil, args...); res.code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, res.code, exitUsage, res.stderr)
		}
	}
	res := runSim(t, dir, nil, "conduct", "run", "missing.yaml")
	if res.code != exitError || !strings.Contains(res.stderr, "missing.yaml") {
		t.Errorf("missing plan file: exit %d stderr %q", res.code, res.stderr)
	}
}

func TestCwdResolution(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "plans", "plan.yaml"), "name: placed\ncwd: ../work\nphases:\n  - id: a\n    prompt: x\n")
	if err := os.MkdirAll(filepath.Join(root, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	assertExit(t, runSim(t, root, nil, "conduct", "run", "plans/plan.yaml"), 0)
	readPlanState(t, filepath.Join(root, "work"), "placed")

	override := t.TempDir()
	assertExit(t, runSim(t, root, nil, "conduct", "run", "plans/plan.yaml", "--cwd", override), 0)
	readPlanState(t, override, "placed")
}
