package mapping

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestDefaultTemplateIsImplementTestDocs(t *testing.T) {
	tm := DefaultTemplate()
	if err := tm.Validate(); err != nil {
		t.Fatal(err)
	}
	if tm.Name != "default" || len(tm.Phases) != 3 {
		t.Fatalf("template %+v", tm)
	}
	impl, test, docs := tm.Phases[0], tm.Phases[1], tm.Phases[2]
	if impl.ID != "implement" || impl.Prompt != "" || len(impl.DependsOn) != 0 {
		t.Errorf("implement %+v", impl)
	}
	if len(impl.Check) != 1 || impl.Check[0].Type != CheckGitClean || impl.Check[0].AllowUntracked == nil || !*impl.Check[0].AllowUntracked {
		t.Errorf("implement check %+v", impl.Check)
	}
	if test.ID != "test" || !reflect.DeepEqual(test.DependsOn, []string{"implement"}) || test.Prompt == "" ||
		!reflect.DeepEqual(test.Check, []Check{{Type: CheckCmdSucceeds, Cmd: "cargo test"}}) {
		t.Errorf("test %+v", test)
	}
	if docs.ID != "docs" || !reflect.DeepEqual(docs.DependsOn, []string{"implement"}) || docs.Prompt == "" ||
		!reflect.DeepEqual(docs.Check, []Check{{Type: CheckFileContains, Path: "README.md", Pattern: "auth"}}) {
		t.Errorf("docs %+v", docs)
	}
	// Each call is a fresh copy.
	*DefaultTemplate().Phases[0].Check[0].AllowUntracked = false
	if !*DefaultTemplate().Phases[0].Check[0].AllowUntracked {
		t.Error("DefaultTemplate shares state between calls")
	}
}

func loadReview(t *testing.T) Template {
	t.Helper()
	tm, err := ParseTemplate(mustReadFile(t, "../testdata/templates/review.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestParseTemplateReviewExample(t *testing.T) {
	tm := loadReview(t)
	if tm.Name != "review" || len(tm.Phases) != 3 {
		t.Fatalf("%+v", tm)
	}
	v := tm.Phases[2]
	if v.MaxAttempts != 2 || v.TimeoutSec != 900 || v.OnFail != OnFailAsk || len(v.Check) != 2 {
		t.Errorf("verify phase %+v", v)
	}
	if v.Check[0] != (Check{Type: CheckCmdSucceeds, Cmd: "go test ./..."}) {
		t.Errorf("short-form check %+v", v.Check[0])
	}
	w := v.Check[1]
	if w.Type != CheckWaitUntil || w.IntervalSec != 10 || w.Backoff != "linear" || w.Check == nil || w.Check.Pattern != "resolved" {
		t.Errorf("wait_until %+v", w)
	}

	d := DispatchPlan{TaskID: "T7", Message: "Review PR 12", Skill: "review", TimeoutSec: intp(1200)}
	set, err := NewTemplateSet(tm)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := set.Select(d)
	if err != nil || sel.Name != "review" {
		t.Fatalf("select: %v %q", err, sel.Name)
	}
	p, err := BuildPlan(d, 1, sel)
	if err != nil {
		t.Fatal(err)
	}
	if p.Phases[1].Prompt != "Review PR 12" || p.Phases[0].TimeoutSec != 1200 || p.Phases[2].TimeoutSec != 900 {
		t.Errorf("built %+v", p.Phases)
	}
	assertRoundTrip(t, p)
}

func intp(i int) *int { return &i }

func TestParseTemplateErrors(t *testing.T) {
	cases := map[string]string{
		"empty":            "",
		"not yaml":         "name: [",
		"no name":          "phases:\n  - id: a\n",
		"bad name":         "name: Review\nphases:\n  - id: a\n",
		"no phases":        "name: r\n",
		"typo key":         "name: r\nphase:\n  - id: a\n",
		"typo phase key":   "name: r\nphases:\n  - id: a\n    promt: x\n",
		"duplicate ids":    "name: r\nphases:\n  - id: a\n  - id: a\n",
		"bad id":           "name: r\nphases:\n  - id: 'a/b'\n",
		"unknown dep":      "name: r\nphases:\n  - id: a\n    depends_on: [z]\n",
		"cycle":            "name: r\nphases:\n  - id: a\n    depends_on: [b]\n  - id: b\n    depends_on: [a]\n",
		"unknown check":    "name: r\nphases:\n  - id: a\n    check:\n      - magic: x\n",
		"incomplete check": "name: r\nphases:\n  - id: a\n    check:\n      - type: file_contains\n        path: x\n",
		"bad on_fail":      "name: r\nphases:\n  - id: a\n    on_fail: never\n",
	}
	for name, y := range cases {
		if _, err := ParseTemplate([]byte(y)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTemplateSetSelect(t *testing.T) {
	review := loadReview(t)
	myDefault := Template{Name: "default", Phases: []Phase{{ID: "only"}}}
	lint := Template{Name: "lint", Phases: []Phase{{ID: "lint", Prompt: "lint"}}}

	set, err := NewTemplateSet(review, lint)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !reflect.DeepEqual(got, []string{"default", "lint", "review"}) {
		t.Errorf("names %v", got)
	}
	cases := []struct {
		name string
		d    DispatchPlan
		want string
	}{
		{"no skill", DispatchPlan{}, "default"},
		{"skill", DispatchPlan{Skill: "review"}, "review"},
		{"skill wins over requiredSkills", DispatchPlan{Skill: "lint", RequiredSkills: []string{"review"}}, "lint"},
		{"first matching requiredSkill", DispatchPlan{RequiredSkills: []string{"coding-agent", "lint", "review"}}, "lint"},
		{"no matching requiredSkill", DispatchPlan{RequiredSkills: []string{"coding-agent"}}, "default"},
		{"skill default", DispatchPlan{Skill: "default"}, "default"},
	}
	for _, c := range cases {
		got, err := set.Select(c.d)
		if err != nil || got.Name != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got.Name, err, c.want)
		}
	}
	_, err = set.Select(DispatchPlan{Skill: "x"})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "skill" || fe.Problem != `no plan template named "x"` {
		t.Errorf("unknown skill: %v", err)
	}

	// An operator "default" replaces the built-in.
	set2, err := NewTemplateSet(myDefault)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := set2.Select(DispatchPlan{})
	if len(got.Phases) != 1 || got.Phases[0].ID != "only" {
		t.Errorf("operator default not used: %+v", got)
	}
	if !reflect.DeepEqual(set2.Names(), []string{"default"}) {
		t.Errorf("names %v", set2.Names())
	}

	// The zero set still has the built-in default.
	var zero TemplateSet
	got, err = zero.Select(DispatchPlan{RequiredSkills: []string{"review"}})
	if err != nil || got.Name != "default" || len(got.Phases) != 3 {
		t.Errorf("zero set: %+v %v", got, err)
	}
	if _, err := zero.Select(DispatchPlan{Skill: "review"}); err == nil {
		t.Error("zero set found review")
	}
}

func TestNewTemplateSetErrors(t *testing.T) {
	a := Template{Name: "a", Phases: []Phase{{ID: "x"}}}
	if _, err := NewTemplateSet(a, a); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := NewTemplateSet(Template{Name: "b"}); err == nil {
		t.Error("template without phases accepted")
	}
	if _, err := NewTemplateSet(Template{Name: "B", Phases: []Phase{{ID: "x"}}}); err == nil {
		t.Error("bad name accepted")
	}
}

func TestLoadTemplates(t *testing.T) {
	review := "name: review\nphases:\n  - id: review\n    prompt: Review it.\n"
	fsys := fstest.MapFS{
		"b-review.yaml": {Data: []byte(review)},
		"lint.yml":      {Data: []byte("phases:\n  - id: lint\n    prompt: Lint it.\n")},
		"notes.txt":     {Data: []byte("not a template")},
		"sub/x.yaml":    {Data: []byte("not: [read")},
	}
	ts, err := LoadTemplates(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"review", "lint", "default"} {
		if _, ok := ts.Lookup(name); !ok {
			t.Errorf("template %q missing; have %v", name, ts.Names())
		}
	}

	builtin, err := LoadTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := builtin.Names(); len(got) != 1 || got[0] != "default" {
		t.Errorf("built-in templates = %v, want [default]", got)
	}

	fsys["broken.yaml"] = &fstest.MapFile{Data: []byte("phases: [")}
	if _, err := LoadTemplates(fsys); err == nil || !strings.Contains(err.Error(), "broken.yaml") {
		t.Errorf("a broken template must be named in the error, got %v", err)
	}
}
