package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

func fullDispatch(t *testing.T) DispatchPlan {
	t.Helper()
	d, err := ParseDispatchPlan(mustReadFile(t, "../testdata/dispatch/full.json"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPlanName(t *testing.T) {
	cases := []struct {
		id      string
		attempt int
		want    string
	}{
		{"t5", 1, "karvi-t5"},
		{"t5", 0, "karvi-t5"},
		{"t5", 2, "karvi-t5-r2"},
		{"t5", 12, "karvi-t5-r12"},
		{"task-12", 1, "karvi-task-12"},
		{"T5", 1, "karvi-t5-" + hash6("T5")},
		{"T5", 3, "karvi-t5-" + hash6("T5") + "-r3"},
		{"a_b", 1, "karvi-a-b-" + hash6("a_b")},
		{"a__b", 1, "karvi-a-b-" + hash6("a__b")},
		{"-a-", 1, "karvi-a-" + hash6("-a-")},
		{"___", 1, "karvi-" + hash6("___")},
		{"t5-r2", 1, "karvi-t5-r2-" + hash6("t5-r2")},
		{"r2", 1, "karvi-r2-" + hash6("r2")},
		{"x-abcdef", 1, "karvi-x-abcdef-" + hash6("x-abcdef")},
		{"x-abcdeg", 1, "karvi-x-abcdeg"},
	}
	for _, c := range cases {
		if got := PlanName(c.id, c.attempt); got != c.want {
			t.Errorf("PlanName(%q, %d) = %q, want %q", c.id, c.attempt, got, c.want)
		}
	}
}

func hash6(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:6]
}

func TestPlanNameNeverCollides(t *testing.T) {
	ids := []string{"T5", "t5", "t5-r2", "t5-r3", "a_b", "a-b", "a--b", "A-B", "a_B", "x", "X", "r2", "t5-020d01",
		"T5-r2", "task", "TASK", "Task", "t5_r2", "0", "00", "0-0", "abcdef", "ABCDEF", "t-abcdef"}
	seen := map[string]string{}
	kebab := regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	for _, id := range ids {
		for attempt := 1; attempt <= 4; attempt++ {
			name := PlanName(id, attempt)
			if !kebab.MatchString(name) {
				t.Errorf("PlanName(%q,%d) = %q is not kebab-case", id, attempt, name)
			}
			if name != PlanName(id, attempt) {
				t.Errorf("PlanName(%q,%d) not deterministic", id, attempt)
			}
			key := id + "#" + string(rune('0'+attempt))
			if prev, dup := seen[name]; dup {
				t.Errorf("PlanName collision: %s and %s both give %q", prev, key, name)
			}
			seen[name] = key
		}
	}
}

func TestBuildPlanFieldMapping(t *testing.T) {
	d := fullDispatch(t)
	p, err := BuildPlan(d, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	// docs/contract.md §3.3, row by row.
	if want := []string{"karvi:T5", "dispatch:disp_abc123"}; !reflect.DeepEqual(p.Tags, want) {
		t.Errorf("taskId/planId -> tags = %v, want %v", p.Tags, want)
	}
	if p.Purpose != d.Message {
		t.Errorf("message -> purpose = %q", p.Purpose)
	}
	if p.TimeoutSec != 600 {
		t.Errorf("timeoutSec -> timeout_sec = %d", p.TimeoutSec)
	}
	if p.MaxAttempts != 3 {
		t.Errorf("max_review_attempts -> max_attempts = %d", p.MaxAttempts)
	}
	wantCtx := "## Upstream Context\nT3 (Setup database): PostgreSQL with JSONB, migrations in src/db/\n"
	if p.Phases[0].Context != wantCtx {
		t.Errorf("artifacts[].summary -> phases[0].context = %q, want %q", p.Phases[0].Context, wantCtx)
	}
	for i, ph := range p.Phases {
		if ph.TimeoutSec != 600 || ph.MaxAttempts != 3 {
			t.Errorf("phase %d timeout/max_attempts = %d/%d, want 600/3 on every phase", i, ph.TimeoutSec, ph.MaxAttempts)
		}
		if ph.AllowedTools != nil {
			t.Errorf("empty requiredSkills must not set allowed_tools, phase %d has %v", i, ph.AllowedTools)
		}
		if ph.Env != nil {
			t.Errorf("dispatch mode must not set env, phase %d has %v", i, ph.Env)
		}
		if i > 0 && ph.Context != "" {
			t.Errorf("only phases[0] gets the upstream context, phase %d has %q", i, ph.Context)
		}
	}
	if p.Env != nil {
		t.Errorf("plan env = %v, want none", p.Env)
	}
	if p.Name != PlanName("T5", 1) {
		t.Errorf("name = %q", p.Name)
	}
	if p.Phases[0].Prompt != d.Message {
		t.Errorf("implement prompt = %q, want the message", p.Phases[0].Prompt)
	}
	if ids := p.Summary().PhaseIDs; !reflect.DeepEqual(ids, []string{"implement", "test", "docs"}) {
		t.Errorf("phases = %v", ids)
	}
	if got := p.Phases[1].DependsOn; !reflect.DeepEqual(got, []string{"implement"}) {
		t.Errorf("test depends_on = %v", got)
	}
	if got := p.Phases[2].DependsOn; !reflect.DeepEqual(got, []string{"implement"}) {
		t.Errorf("docs depends_on = %v", got)
	}
}

func TestBuildPlanRequiredSkillsAndRedispatch(t *testing.T) {
	d := fullDispatch(t)
	d.RequiredSkills = []string{"coding-agent", " gctx-workflow ", "coding-agent"}
	d.Mode = ModeRedispatch
	p, err := BuildPlan(d, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	for i, ph := range p.Phases {
		if !reflect.DeepEqual(ph.AllowedTools, []string{"coding-agent", "gctx-workflow"}) {
			t.Errorf("phase %d allowed_tools = %v", i, ph.AllowedTools)
		}
		if ph.Env["REDISPATCH"] != "1" {
			t.Errorf("phase %d env = %v, want REDISPATCH=1", i, ph.Env)
		}
	}
	if p.Env["REDISPATCH"] != "1" {
		t.Errorf("plan env = %v", p.Env)
	}
	if p.Name != PlanName("T5", 1) || !p.Summary().Redispatch {
		t.Errorf("name %q redispatch %v", p.Name, p.Summary().Redispatch)
	}

	// attempt > 1 alone also means a redispatch, with a fresh name.
	d.Mode = ModeDispatch
	p2, err := BuildPlan(d, 2, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	if p2.Env["REDISPATCH"] != "1" || p2.Phases[2].Env["REDISPATCH"] != "1" || p2.Name != PlanName("T5", 2) {
		t.Errorf("attempt 2: env %v / %v name %q", p2.Env, p2.Phases[2].Env, p2.Name)
	}
	if !strings.HasSuffix(p2.Name, "-r2") {
		t.Errorf("attempt 2 name %q lacks -r2", p2.Name)
	}
}

func TestBuildPlanNoPlanIDNoDispatchTag(t *testing.T) {
	d := fullDispatch(t)
	d.PlanID = ""
	p, err := BuildPlan(d, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Tags, []string{"karvi:T5"}) {
		t.Errorf("tags = %v", p.Tags)
	}
}

func TestBuildPlanDefaults(t *testing.T) {
	d := DispatchPlan{TaskID: "t9", Message: "do it"}
	p, err := BuildPlan(d, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	if p.TimeoutSec != 300 || p.MaxAttempts != 3 {
		t.Errorf("defaults: timeout %d max %d", p.TimeoutSec, p.MaxAttempts)
	}
	for _, ph := range p.Phases {
		if ph.TimeoutSec != 300 || ph.MaxAttempts != 3 || ph.Context != "" {
			t.Errorf("phase %s: %d %d %q", ph.ID, ph.TimeoutSec, ph.MaxAttempts, ph.Context)
		}
	}
}

func TestBuildPlanUpstreamContext(t *testing.T) {
	d := DispatchPlan{TaskID: "t9", Message: "m", Artifacts: []Artifact{
		{ID: "A1", Title: "First", Summary: "line one\nline two"},
		{ID: "A2", Title: "No summary"},
		{ID: "A3", Summary: "untitled"},
		{ID: "A4", Title: "Blank", Summary: "  \n "},
	}}
	p, err := BuildPlan(d, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	want := "## Upstream Context\nA1 (First): line one line two\nA3: untitled\n"
	if p.Phases[0].Context != want {
		t.Errorf("context = %q, want %q", p.Phases[0].Context, want)
	}
	// A template's own context comes first.
	tmpl := DefaultTemplate()
	tmpl.Phases[0].Context = "Repo conventions: gofmt.\n"
	p, err = BuildPlan(d, 1, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if p.Phases[0].Context != "Repo conventions: gofmt.\n\n"+want {
		t.Errorf("merged context = %q", p.Phases[0].Context)
	}
}

// Fields that are accepted but not mapped (docs/contract.md §2) must not leak
// into plan.yaml.
func TestBuildPlanNotMappedFields(t *testing.T) {
	q := 73.25
	tr, fa := true, false
	d := DispatchPlan{
		TaskID: "t9", Message: "m", Kind: "KIND_SENTINEL",
		RuntimeHint: "RUNTIME_SENTINEL", AgentID: "AGENT_SENTINEL",
		CodexRole: "ROLE_SENTINEL", SessionID: "SESSION_SENTINEL", UserID: "USER_SENTINEL",
		CreatedAt: "CREATED_SENTINEL", UpstreamTaskIDs: []string{"UPSTREAM_SENTINEL"},
		ControlsSnapshot: &Controls{QualityThreshold: &q, AutoReview: &tr, AutoDispatch: &fa, AutoRedispatch: &tr},
		Artifacts:        []Artifact{{ID: "A1", Status: "STATUS_SENTINEL", Payload: []byte(`"PAYLOAD_SENTINEL"`), OutputRef: "REF_SENTINEL"}},
		InjectedLessons:  []byte(`["LESSON_SENTINEL"]`), RuntimeSelection: []byte(`{"x":"SELECTION_SENTINEL"}`),
		Steps: []byte(`["STEPS_SENTINEL"]`), WorkingDir: "/WORKDIR_SENTINEL",
	}
	p, err := BuildPlan(d, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	y, err := MarshalPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SENTINEL", "73.25", "auto_review", "quality_threshold", "A1"} {
		if strings.Contains(string(y), s) {
			t.Errorf("plan.yaml leaks %q:\n%s", s, y)
		}
	}
	for _, k := range []string{"allowed_tools", "env", "REDISPATCH", "context"} {
		if strings.Contains(string(y), k) {
			t.Errorf("plan.yaml has %q although nothing maps to it:\n%s", k, y)
		}
	}
}

// modelHint reaches every phase's agent as ANTHROPIC_MODEL (edda ignores
// plan-level env); a template that set the variable itself keeps its value.
func TestBuildPlanModelHint(t *testing.T) {
	opus, blank := "opus", "  "
	tmpl := DefaultTemplate()
	tmpl.Phases[1].Env = map[string]string{ModelEnv: "haiku"}
	p, err := BuildPlan(DispatchPlan{TaskID: "t1", Message: "m", ModelHint: &opus}, 2, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	for i, ph := range p.Phases {
		want := "opus"
		if i == 1 {
			want = "haiku"
		}
		if ph.Env[ModelEnv] != want || ph.Env["REDISPATCH"] != "1" {
			t.Errorf("phase %s env = %v, want %s=%s and REDISPATCH=1", ph.ID, ph.Env, ModelEnv, want)
		}
	}
	if p.Env[ModelEnv] != "opus" {
		t.Errorf("plan env = %v", p.Env)
	}
	p, err = BuildPlan(DispatchPlan{TaskID: "t1", Message: "m", ModelHint: &blank}, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	if p.Env != nil || p.Phases[0].Env != nil {
		t.Errorf("a blank modelHint set env: %v / %v", p.Env, p.Phases[0].Env)
	}
}

func TestBuildPlanTemplateOverrides(t *testing.T) {
	tmpl := Template{Name: "x", Phases: []Phase{
		{ID: "a", Prompt: "own prompt", TimeoutSec: 60, MaxAttempts: 1, AllowedTools: []string{"Read"}, Env: map[string]string{"K": "V"}},
		{ID: "b", DependsOn: []string{"a"}},
	}}
	d := DispatchPlan{TaskID: "t1", Message: "msg", RequiredSkills: []string{"Read", "Bash"}, Mode: ModeRedispatch}
	p, err := BuildPlan(d, 1, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.Phases[0], p.Phases[1]
	if a.Prompt != "own prompt" || b.Prompt != "msg" {
		t.Errorf("prompts %q %q", a.Prompt, b.Prompt)
	}
	if a.TimeoutSec != 60 || a.MaxAttempts != 1 || b.TimeoutSec != 300 || b.MaxAttempts != 3 {
		t.Errorf("limits a=%d/%d b=%d/%d", a.TimeoutSec, a.MaxAttempts, b.TimeoutSec, b.MaxAttempts)
	}
	if !reflect.DeepEqual(a.AllowedTools, []string{"Read", "Bash"}) {
		t.Errorf("allowed_tools %v", a.AllowedTools)
	}
	if !reflect.DeepEqual(a.Env, map[string]string{"K": "V", "REDISPATCH": "1"}) {
		t.Errorf("env %v", a.Env)
	}
	// The template itself is untouched.
	if len(tmpl.Phases[0].Env) != 1 || len(tmpl.Phases[0].AllowedTools) != 1 || tmpl.Phases[1].Prompt != "" {
		t.Errorf("BuildPlan modified its template: %+v", tmpl.Phases)
	}
}

func TestBuildPlanRejects(t *testing.T) {
	if _, err := BuildPlan(DispatchPlan{TaskID: "t1"}, 1, DefaultTemplate()); err == nil {
		t.Error("invalid dispatch accepted")
	}
	if _, err := BuildPlan(DispatchPlan{TaskID: "t1", Message: "m"}, 1, Template{Name: "x"}); err == nil {
		t.Error("template without phases accepted")
	}
}

func TestBuildPlanVariantsValidate(t *testing.T) {
	messages := []string{
		"plain", `with "double" and 'single' quotes`, "key: value", "# not a comment", "{{ template }}",
		"${{ env.HOME }}", "line1\nline2\n", "  leading and trailing  ", "trailing spaces \nnext", "tab\there",
		"crlf\r\nline", "yes", "null", "~", "- item", "? key", "@at", "`back`", "加入 JWT 認證 ✓ 🚀", "%percent", "&anchor *alias",
		"!tag", "|", ">", "0x10", "1e3", "---", "...", "multi\n\n\nblank lines", "\u00a0nbsp", "end with newline\n",
	}
	taskIDs := []string{"T5", "t5", "a_b", "X-1", "0", strings.Repeat("Z", 64)}
	n := 0
	for _, msg := range messages {
		for _, id := range taskIDs {
			for attempt := 1; attempt <= 2; attempt++ {
				d := DispatchPlan{TaskID: id, Message: msg, PlanID: "disp:1", RequiredSkills: []string{"s1"},
					Artifacts: []Artifact{{ID: "U1", Title: msg, Summary: msg}}}
				p, err := BuildPlan(d, attempt, DefaultTemplate())
				if err != nil {
					t.Fatalf("BuildPlan(%q, %q): %v", id, msg, err)
				}
				assertRoundTrip(t, p)
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no variants ran")
	}
}

func assertRoundTrip(t *testing.T, p Plan) {
	t.Helper()
	y, err := MarshalPlan(p)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	back, err := ParsePlan(y)
	if err != nil {
		t.Fatalf("parse of marshalled plan: %v\n%s", err, y)
	}
	if !reflect.DeepEqual(p, back) {
		t.Fatalf("round trip changed the plan\nbefore %#v\nafter  %#v\nyaml:\n%s", p, back, y)
	}
}

func TestValidateRejectsWhatEddaRejects(t *testing.T) {
	ok := func() Plan {
		return Plan{Name: "karvi-t5", Phases: []Phase{
			{ID: "a", Prompt: "x"},
			{ID: "b", Prompt: "y", DependsOn: []string{"a"}},
		}}
	}
	nan := 0.0
	nan = nan / nan
	neg := -1.0
	cases := []struct {
		name    string
		mutate  func(p *Plan)
		field   string
		problem string
	}{
		{"uppercase name", func(p *Plan) { p.Name = "Karvi-t5" }, "name", "kebab-case"},
		{"uppercase id karvi-T5", func(p *Plan) { p.Name = "karvi-T5" }, "name", "kebab-case"},
		{"empty name", func(p *Plan) { p.Name = "" }, "name", "kebab-case"},
		{"leading dash", func(p *Plan) { p.Name = "-x" }, "name", "kebab-case"},
		{"underscore", func(p *Plan) { p.Name = "a_b" }, "name", "kebab-case"},
		{"no phases", func(p *Plan) { p.Phases = nil }, "phases", "at least one phase"},
		{"duplicate ids", func(p *Plan) { p.Phases[1].ID = "a"; p.Phases[1].DependsOn = nil }, "phases[1].id", "duplicate"},
		{"empty id", func(p *Plan) { p.Phases[0].ID = "" }, "phases[0].id", "required"},
		{"bad id", func(p *Plan) { p.Phases[0].ID = "a b"; p.Phases[1].DependsOn = nil }, "phases[0].id", "must be"},
		{"unknown depends_on", func(p *Plan) { p.Phases[1].DependsOn = []string{"nonexistent"} }, "phases[1].depends_on", "nonexistent"},
		{"cycle", func(p *Plan) { p.Phases[0].DependsOn = []string{"b"} }, "phases", "cycle: a -> b -> a"},
		{"self cycle", func(p *Plan) { p.Phases[0].DependsOn = []string{"a"} }, "phases", "cycle: a -> a"},
		{"empty prompt", func(p *Plan) { p.Phases[1].Prompt = " " }, "phases[1].prompt", "required"},
		{"plan on_fail", func(p *Plan) { p.OnFail = "retry" }, "on_fail", "auto_retry"},
		{"phase on_fail", func(p *Plan) { p.Phases[0].OnFail = "AutoRetry" }, "phases[0].on_fail", "auto_retry"},
		{"negative max_attempts", func(p *Plan) { p.MaxAttempts = -1 }, "max_attempts", "negative"},
		{"negative phase timeout", func(p *Plan) { p.Phases[1].TimeoutSec = -1 }, "phases[1].timeout_sec", "negative"},
		{"NaN budget", func(p *Plan) { p.BudgetUSD = &nan }, "budget_usd", "finite"},
		{"negative phase budget", func(p *Plan) { p.Phases[0].BudgetUSD = &neg }, "phases[0].budget_usd", "finite"},
		{"empty allowed tool", func(p *Plan) { p.Phases[0].AllowedTools = []string{""} }, "phases[0].allowed_tools[0]", "empty"},
		{"unknown check", func(p *Plan) { p.Phases[0].Check = []Check{{Type: "magic_check"}} }, "phases[0].check[0].type", "unknown check type"},
		{"check without type", func(p *Plan) { p.Phases[0].Check = []Check{{Cmd: "x"}} }, "phases[0].check[0].type", "required"},
		{"cmd_succeeds no cmd", func(p *Plan) { p.Phases[0].Check = []Check{{Type: CheckCmdSucceeds}} }, "phases[0].check[0].cmd", "required"},
		{"file_exists no path", func(p *Plan) { p.Phases[0].Check = []Check{{Type: CheckFileExists}} }, "phases[0].check[0].path", "required"},
		{"file_contains no pattern", func(p *Plan) { p.Phases[0].Check = []Check{{Type: CheckFileContains, Path: "R"}} }, "phases[0].check[0].pattern", "required"},
		{"edda_event no type", func(p *Plan) { p.Phases[0].Check = []Check{{Type: CheckEddaEvent}} }, "phases[0].check[0].event_type", "required"},
		{"wait_until no check", func(p *Plan) { p.Phases[0].Check = []Check{{Type: CheckWaitUntil}} }, "phases[0].check[0].check", "required"},
		{"nested wait_until", func(p *Plan) {
			p.Phases[0].Check = []Check{{Type: CheckWaitUntil, Check: &Check{Type: CheckWaitUntil, Check: &Check{Type: CheckFileExists, Path: "x"}}}}
		}, "phases[0].check[0].check", "cannot nest"},
		{"bad backoff", func(p *Plan) {
			p.Phases[0].Check = []Check{{Type: CheckWaitUntil, Backoff: "random", Check: &Check{Type: CheckGitClean}}}
		}, "phases[0].check[0].backoff", "none, linear or exponential"},
		{"bad inner check", func(p *Plan) {
			p.Phases[0].Check = []Check{{Type: CheckWaitUntil, Check: &Check{Type: CheckCmdSucceeds}}}
		}, "phases[0].check[0].check.cmd", "required"},
		{"negative check timeout", func(p *Plan) { p.Phases[0].Check = []Check{{Type: CheckCmdSucceeds, Cmd: "x", TimeoutSec: -5}} }, "phases[0].check[0].timeout_sec", "negative"},
	}
	base := ok()
	if err := base.Validate(); err != nil {
		t.Fatalf("base plan invalid: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := ok()
			c.mutate(&p)
			err := p.Validate()
			var pe *PlanError
			if !errors.As(err, &pe) {
				t.Fatalf("want *PlanError, got %v", err)
			}
			if pe.Field != c.field || !strings.Contains(pe.Problem, c.problem) {
				t.Errorf("got %q / %q, want %q / containing %q", pe.Field, pe.Problem, c.field, c.problem)
			}
		})
	}
}

func TestValidateAcceptsAllCheckTypes(t *testing.T) {
	tr := true
	p := Plan{Name: "all-checks-1", OnFail: OnFailAsk, Phases: []Phase{{ID: "a", Prompt: "x", OnFail: OnFailSkip, Check: []Check{
		{Type: CheckFileExists, Path: "a"},
		{Type: CheckCmdSucceeds, Cmd: "true", TimeoutSec: 10},
		{Type: CheckFileContains, Path: "a", Pattern: "b"},
		{Type: CheckGitClean},
		{Type: CheckGitClean, AllowUntracked: &tr},
		{Type: CheckEddaEvent, EventType: "commit", After: "phase_start"},
		{Type: CheckWaitUntil, IntervalSec: 5, TimeoutSec: 60, Backoff: "exponential", Check: &Check{Type: CheckFileExists, Path: "x"}},
	}}, {ID: "b", Prompt: "y", OnFail: OnFailAbort}, {ID: "c", Prompt: "z", OnFail: OnFailAutoRetry, DependsOn: []string{"a", "b"}}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	assertRoundTrip(t, p)
}

func TestParsePlanShortFormChecks(t *testing.T) {
	y := `
name: short-form
unknown_top_key: ignored
phases:
  - id: one
    prompt: x
    unknown_phase_key: ignored
    check:
      - cmd_succeeds: "cargo build"
      - file_exists: "src/main.rs"
      - file_contains:
          path: Cargo.toml
          pattern: edda-core
      - git_clean: true
      - git_clean: {allow_untracked: true}
      - edda_event: commit
      - edda_event: {event_type: note, after: phase_start}
      - type: cmd_succeeds
        cmd: "cargo test"
        timeout_sec: 300
`
	p, err := ParsePlan([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	tr := true
	want := []Check{
		{Type: CheckCmdSucceeds, Cmd: "cargo build"},
		{Type: CheckFileExists, Path: "src/main.rs"},
		{Type: CheckFileContains, Path: "Cargo.toml", Pattern: "edda-core"},
		{Type: CheckGitClean},
		{Type: CheckGitClean, AllowUntracked: &tr},
		{Type: CheckEddaEvent, EventType: "commit"},
		{Type: CheckEddaEvent, EventType: "note", After: "phase_start"},
		{Type: CheckCmdSucceeds, Cmd: "cargo test", TimeoutSec: 300},
	}
	if !reflect.DeepEqual(p.Phases[0].Check, want) {
		t.Errorf("checks:\n got %#v\nwant %#v", p.Phases[0].Check, want)
	}
}

func TestParsePlanErrors(t *testing.T) {
	cases := map[string]string{
		"not yaml":          "name: [",
		"unknown short":     "name: x\nphases:\n  - id: a\n    prompt: p\n    check:\n      - magic_check: foo\n",
		"two keys":          "name: x\nphases:\n  - id: a\n    prompt: p\n    check:\n      - {cmd_succeeds: a, file_exists: b}\n",
		"scalar check":      "name: x\nphases:\n  - id: a\n    prompt: p\n    check:\n      - cargo test\n",
		"cmd not string":    "name: x\nphases:\n  - id: a\n    prompt: p\n    check:\n      - cmd_succeeds: [a]\n",
		"contains scalar":   "name: x\nphases:\n  - id: a\n    prompt: p\n    check:\n      - file_contains: README.md\n",
		"wait_until short":  "name: x\nphases:\n  - id: a\n    prompt: p\n    check:\n      - wait_until: {check: {type: git_clean}}\n",
		"edda_event null":   "name: x\nphases:\n  - id: a\n    prompt: p\n    check:\n      - edda_event: ~\n",
		"uppercase name":    "name: karvi-T5\nphases:\n  - id: a\n    prompt: p\n",
		"timeout string":    "name: x\ntimeout_sec: soon\nphases:\n  - id: a\n    prompt: p\n",
		"phases not a list": "name: x\nphases: {a: 1}\n",
	}
	for name, y := range cases {
		if _, err := ParsePlan([]byte(y)); err == nil {
			t.Errorf("%s: accepted:\n%s", name, y)
		}
	}
}

// A hand-written plan in the shape of the full dispatch's (upstream context
// inside the prompt, quoted scalars, blank lines between phases) must parse
// and validate.
func TestParsePlanHandWrittenYAML(t *testing.T) {
	y := `name: karvi-t5
purpose: "Add user authentication with JWT. Use middleware pattern."
timeout_sec: 600
max_attempts: 3
tags:
  - "karvi:T5"
  - "dispatch:disp_abc123"

phases:
  - id: implement
    prompt: |
      Add user authentication with JWT. Use middleware pattern.

      ## Upstream Context
      T3 (Setup database): PostgreSQL with JSONB, migrations in src/db/
    check:
      - type: git_clean
        allow_untracked: true

  - id: test
    depends_on: [implement]
    prompt: |
      Write tests for the authentication implementation.
      Ensure all tests pass.
    check:
      - type: cmd_succeeds
        cmd: "cargo test"

  - id: docs
    depends_on: [implement]
    prompt: |
      Update documentation to reflect the new authentication feature.
    check:
      - type: file_contains
        path: README.md
        pattern: "auth"
`
	p, err := ParsePlan([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Phases) != 3 || *p.Phases[0].Check[0].AllowUntracked != true || p.Phases[2].Check[0].Pattern != "auth" {
		t.Errorf("parsed %#v", p)
	}
}

func TestMarshalPlanUsesEncoder(t *testing.T) {
	// A message that would break a string template: it must come back intact.
	msg := "x\"\nname: evil\nphases: []\n# {{ .Name }}"
	p, err := BuildPlan(DispatchPlan{TaskID: "t1", Message: msg}, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	y, err := MarshalPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := yaml.Unmarshal(y, &generic); err != nil {
		t.Fatal(err)
	}
	if generic["name"] != p.Name || generic["purpose"] != msg {
		t.Errorf("injection changed the document: name=%v purpose=%q", generic["name"], generic["purpose"])
	}
	assertRoundTrip(t, p)
}

func TestSummary(t *testing.T) {
	b := 5.0
	p := Plan{Name: "n", TimeoutSec: 10, MaxAttempts: 2, BudgetUSD: &b, Env: map[string]string{"REDISPATCH": "1"},
		Phases: []Phase{{ID: "a"}, {ID: "b"}}}
	s := p.Summary()
	if s.Name != "n" || !reflect.DeepEqual(s.PhaseIDs, []string{"a", "b"}) || s.TimeoutSec != 10 || s.MaxAttempts != 2 || *s.BudgetUSD != 5 || !s.Redispatch {
		t.Errorf("summary %+v", s)
	}
	b = 6
	if *s.BudgetUSD != 5 {
		t.Error("summary aliases the plan's budget")
	}
}

func FuzzPlanRoundTrip(f *testing.F) {
	f.Add("Add user authentication with JWT. Use middleware pattern.", "T5", "Setup database", "PostgreSQL with JSONB", uint8(1), false)
	f.Add("x\"\nname: evil\n# {{ .Name }}\n", "a_b", "t: \"q\"", "- item\n  - nested", uint8(2), true)
	f.Add("加入 JWT 認證 ✓\r\n\ttab", "T-1", "", "  ", uint8(0), false)
	f.Add("yes", "0", "null", "~", uint8(9), true)
	f.Fuzz(func(t *testing.T, msg, taskID, title, summary string, attempt uint8, redispatch bool) {
		d := DispatchPlan{TaskID: taskID, Message: msg, PlanID: "disp_1",
			Artifacts: []Artifact{{ID: "U1", Title: title, Summary: summary}}, RequiredSkills: []string{"skill-a"}}
		if redispatch {
			d.Mode = ModeRedispatch
		}
		// Only what karvi can send: JSON strings are valid UTF-8.
		if !utf8.ValidString(msg) || !utf8.ValidString(title) || !utf8.ValidString(summary) || d.Validate() != nil {
			return
		}
		p, err := BuildPlan(d, int(attempt), DefaultTemplate())
		if err != nil {
			t.Fatalf("valid dispatch gave no plan: %v", err)
		}
		// Leading blank lines are dropped by design (promptText).
		if !planNamePattern.MatchString(p.Name) || p.Purpose != promptText(msg) || !strings.HasSuffix(msg, p.Purpose) {
			t.Fatalf("name %q purpose %q", p.Name, p.Purpose)
		}
		assertRoundTrip(t, p)
	})
}
