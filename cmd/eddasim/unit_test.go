package main

import (
	"strings"
	"testing"
	"time"
)

func TestTopoSortBreaksTiesByID(t *testing.T) {
	plan, err := parsePlan([]byte(`name: t
phases:
  - id: zeta
    prompt: x
  - id: implement
    prompt: x
  - id: test
    prompt: x
    depends_on: [implement]
  - id: docs
    prompt: x
    depends_on: [implement]
  - id: alpha
    prompt: x
    depends_on: [zeta]
`))
	if err != nil {
		t.Fatal(err)
	}
	order, err := topoSort(plan)
	if err != nil {
		t.Fatal(err)
	}
	// Kahn's queue: roots sorted (implement, zeta), then each released batch sorted.
	if got, want := strings.Join(order, " "), "implement zeta docs test alpha"; got != want {
		t.Errorf("order = %q, want %q", got, want)
	}
}

func TestFindDirectives(t *testing.T) {
	dirs, err := findDirectives(`Do it. [sim fail=2 error="a ] b" delay=1s] and [simple] text [sim phase=x pass]`)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 2 {
		t.Fatalf("got %d directives: %+v", len(dirs), dirs)
	}
	if got := dirs[0].kv; len(got) != 3 || got[1] != [2]string{"error", "a ] b"} {
		t.Errorf("first = %+v", got)
	}
	if dirs[1].phase != "x" || dirs[1].kv[0][0] != "pass" {
		t.Errorf("second = %+v", dirs[1])
	}
	for _, bad := range []string{"[sim fail", `[sim error="x]`, "[sim nope]", "[sim pass=1]", "[sim phase=]"} {
		if _, err := findDirectives(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestResolveScenarioPriority(t *testing.T) {
	plan, err := parsePlan([]byte(`name: t
purpose: "[sim delay=2s cost=0.5] [sim phase=b fail=1]"
phases:
  - id: a
    prompt: "[sim cost=null]"
  - id: b
    context: "[sim crash]"
    prompt: "[sim pass events=3] [sim phase=a timeout]"
  - id: c
    prompt: x
`))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := resolveScenario(plan, "strict checks=pass delay=1ms; phase=c fail")
	if err != nil {
		t.Fatal(err)
	}
	if !sc.strict {
		t.Error("strict from the env not applied")
	}
	a, b, c := sc.phases["a"], sc.phases["b"], sc.phases["c"]
	if a.Cost != nil || a.Delay != 2*time.Second || a.Checks != "pass" || a.Timeout {
		t.Errorf("a = %+v", a)
	}
	// b: purpose fail=1 and context crash are cleared by the prompt's pass.
	if b.FailN != 0 || b.CrashN != 0 || b.Events != 3 || *b.Cost != 0.5 {
		t.Errorf("b = %+v", b)
	}
	if c.FailN != always || c.Delay != 2*time.Second {
		t.Errorf("c = %+v", c)
	}
}

func TestScenarioEnvIgnoresUnknownPhases(t *testing.T) {
	plan, err := parsePlan([]byte("name: t\nphases:\n  - id: a\n    prompt: x\n"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := resolveScenario(plan, "phase=elsewhere fail")
	if err != nil || sc.phases["a"].FailN != 0 {
		t.Errorf("sc = %+v, err %v", sc, err)
	}
	if _, err := resolveScenario(plan, "delay=fast"); err == nil {
		t.Error("bad delay accepted")
	}
}

func TestMaskSecrets(t *testing.T) {
	in := "key sk-ant1234567890abcdefghij; Authorization: Bearer abc.def; password=hunter2&token=t1 fine"
	got := maskSecrets(in)
	for _, leak := range []string{"sk-ant", "abc.def", "hunter2", "t1 "} {
		if strings.Contains(got, leak) {
			t.Errorf("%q leaks %q", got, leak)
		}
	}
	if !strings.Contains(got, "password=[MASKED]") || !strings.Contains(got, "Bearer [MASKED]") {
		t.Errorf("masked = %q", got)
	}
}

func TestEncodeEventKeepsHeaderFirst(t *testing.T) {
	ts := time.Date(2026, 2, 28, 3, 0, 0, 123456789, time.FixedZone("x", 3600))
	line, err := encodeEvent(7, ts, "phase_passed", evPhasePassed{PhaseID: "a", Attempt: 1, DurationMS: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":7,"ts":"2026-02-28T02:00:00.123456789Z","type":"phase_passed","phase_id":"a","attempt":1,"duration_ms":5,"cost_usd":null}` + "\n"
	if string(line) != want {
		t.Errorf("line = %s want %s", line, want)
	}
	line, err = encodeEvent(0, ts, "empty", struct{}{})
	if err != nil || !strings.HasSuffix(string(line), `"type":"empty"}`+"\n") {
		t.Errorf("empty body line = %s (%v)", line, err)
	}
}

func TestExpandEnvVars(t *testing.T) {
	t.Setenv("EDDASIM_X", "val")
	cases := map[string]string{
		"a ${{ env.EDDASIM_X }} b": "a val b",
		"${{env.EDDASIM_NOPE}}":    "",
		"${{ other }} keep":        "${{ other }} keep",
		"open ${{ env.X":           "open ${{ env.X",
	}
	for in, want := range cases {
		if got := expandEnvVars(in); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAgentResultDebug(t *testing.T) {
	c := 0.85
	if got := agentResultDebug(agentResult{kind: agentBudget, cost: &c}); got != "BudgetExceeded { cost_usd: Some(0.85) }" {
		t.Errorf("got %q", got)
	}
	if got := agentResultDebug(agentResult{kind: agentMaxTurns}); got != "MaxTurns { cost_usd: None }" {
		t.Errorf("got %q", got)
	}
}

// A wait_until check carries its inner check in tagged form; the inner
// check must be decoded, not reported missing.
func TestWaitUntilDecodesInnerCheck(t *testing.T) {
	plan, err := parsePlan([]byte(`name: t
phases:
  - id: a
    prompt: x
    check:
      - type: wait_until
        timeout_sec: 120
        check:
          type: file_contains
          path: REVIEW.md
          pattern: resolved
        interval_sec: 10
`))
	if err != nil {
		t.Fatalf("parsePlan: %v", err)
	}
	c := plan.Phases[0].Check[0]
	if c.Type != "wait_until" || c.Inner == nil || c.Inner.Type != "file_contains" || c.Inner.Pattern != "resolved" {
		t.Fatalf("inner check not decoded: %+v inner %+v", c, c.Inner)
	}
	if _, err := parsePlan([]byte("name: t\nphases:\n  - id: a\n    prompt: x\n    check:\n      - type: wait_until\n")); err == nil {
		t.Fatal("a wait_until without an inner check must be rejected")
	}
}
