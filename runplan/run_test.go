package runplan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/mapping"
)

func sample(t *testing.T) Run {
	t.Helper()
	data, err := os.ReadFile("../testdata/runs/sample.json")
	require.NoError(t, err)
	r, err := Parse(data)
	require.NoError(t, err)
	return r
}

func TestParseSample(t *testing.T) {
	r := sample(t)
	require.Equal(t, "user-profiles", r.Slug, "a slug given is kept")
	require.Equal(t, "karvi-run-"+r.Slug, r.WorkflowID())
	require.Equal(t, 2, r.Concurrency)
	require.True(t, r.AutoStart)
	require.Len(t, r.Tasks, 6)
	e2e, ok := r.Task("e2e")
	require.True(t, ok)
	require.Equal(t, []string{"api", "ui"}, e2e.Depends, "depends and blocked_by are one union, each id once")
	ui, _ := r.Task("ui")
	require.Equal(t, []string{"schema"}, ui.Depends, "blocked_by alone")
	require.JSONEq(t, `"1h"`, string(r.Tasks[0].Estimate))
}

func TestOrderIsDependencyLevelsInFileOrder(t *testing.T) {
	require.Equal(t, [][]string{
		{"schema", "lint"},
		{"api", "ui", "changelog"},
		{"e2e"},
	}, sample(t).Order())
}

func TestDefaults(t *testing.T) {
	r, err := Parse([]byte(`{"title":"T","tasks":[{"id":"a","title":"A","extra":{"x":1}}],"unknown":true}`))
	require.NoError(t, err)
	require.Equal(t, DefaultConcurrency, r.Concurrency)
	require.Equal(t, "t-"+r.Slug[2:], r.Slug)
	require.Equal(t, [][]string{{"a"}}, r.Order())
}

func TestModel(t *testing.T) {
	r, err := Parse([]byte(`{"title":"m","tasks":[
		{"id":"hint","title":"x","modelHint":"haiku","model":"opus","complexity":9},
		{"id":"karimo","title":"x","model":"opus","complexity":1},
		{"id":"c4","title":"x","complexity":4},
		{"id":"c5","title":"x","complexity":5},
		{"id":"c10","title":"x","complexity":10},
		{"id":"none","title":"x"}]}`))
	require.NoError(t, err)
	for id, want := range map[string]string{
		"hint": "haiku", "karimo": "opus", "c4": ModelSonnet, "c5": ModelOpus, "c10": ModelOpus, "none": ModelSonnet, "nosuch": "",
	} {
		require.Equal(t, want, r.Model(id), id)
	}
}

func TestSlug(t *testing.T) {
	cases := map[string]string{
		"plain":                           "plain",
		"already-kebab-2":                 "already-kebab-2",
		"ends-like-hash-abc123":           "ends-like-hash-abc123-",
		"User profiles":                   "user-profiles-",
		"Ünïcode only ✓":                  "n-code-only-",
		"!!!":                             "run-",
		"":                                "run-",
		strings.Repeat("long title ", 10): "long-title-long-title-long-title-long-tit-",
	}
	for title, prefix := range cases {
		s := DeriveSlug(title)
		require.LessOrEqual(t, len(s), MaxSlugLen, title)
		require.Regexp(t, slugPattern, s, title)
		if title == prefix {
			require.Equal(t, title, s)
		} else {
			require.True(t, strings.HasPrefix(s, prefix), "%q: %q", title, s)
			require.Len(t, s, len(prefix)+6, "%q: %q", title, s)
		}
	}
	// Titles that kebab alike still get different slugs.
	require.NotEqual(t, DeriveSlug("User profiles"), DeriveSlug("user profiles"))
	require.NotEqual(t, DeriveSlug("user-profiles"), DeriveSlug("User profiles"))

	r, err := Parse([]byte(`{"title":"Whatever It Is","slug":"profiles","tasks":[{"id":"a","title":"A"}]}`))
	require.NoError(t, err)
	require.Equal(t, "profiles", r.Slug, "a given slug wins")
	require.Equal(t, "run-profiles-a", r.PlanID("a"))
}

func TestDispatch(t *testing.T) {
	r := sample(t)
	up := []Upstream{
		{ID: "api", Title: "Profile API", Status: "completed", Summary: "GET/PATCH /api/profile in src/api/profile.go"},
		{ID: "ui", Title: "Profile page", Status: "completed", Summary: "pages/profile.tsx"},
	}
	d := r.Dispatch("e2e", up)
	require.NoError(t, d.Validate())
	require.Equal(t, "e2e", d.TaskID)
	require.Equal(t, "run-"+r.Slug+"-e2e", d.PlanID)
	require.Equal(t, mapping.ModeDispatch, d.Mode)
	require.Equal(t, "edda", d.RuntimeHint)
	require.Equal(t, "Profile end-to-end tests\n\nBrowser tests that edit a profile through the page and the API.", d.Message)
	require.NotNil(t, d.ModelHint)
	require.Equal(t, "opus", *d.ModelHint)
	require.Equal(t, []string{"api", "ui"}, d.UpstreamTaskIDs)
	require.Equal(t, []mapping.Artifact{
		{ID: "api", Title: "Profile API", Status: "completed", Summary: "GET/PATCH /api/profile in src/api/profile.go"},
		{ID: "ui", Title: "Profile page", Status: "completed", Summary: "pages/profile.tsx"},
	}, d.Artifacts)

	// The upstream outcomes reach the first phase's context of the plan.
	ts, err := mapping.LoadTemplates(nil)
	require.NoError(t, err)
	tmpl, err := ts.Select(d)
	require.NoError(t, err)
	p, err := mapping.BuildPlan(d, 1, tmpl)
	require.NoError(t, err)
	require.Equal(t, "## Upstream Context\n"+
		"api (Profile API): GET/PATCH /api/profile in src/api/profile.go\n"+
		"ui (Profile page): pages/profile.tsx\n", p.Phases[0].Context)
	require.Equal(t, d.Message, p.Phases[0].Prompt)
	for _, ph := range p.Phases[1:] {
		require.NotContains(t, ph.Context, "Upstream")
	}

	require.Empty(t, r.Dispatch("schema", nil).Artifacts)
	require.Error(t, r.Dispatch("nosuch", nil).Validate())
}

func TestDispatchMessageCarriesSpec(t *testing.T) {
	r, err := Parse([]byte(`{"title":"s","tasks":[
		{"id":"a","title":"  A title ","description":"\nThe description.\n","spec":"See spec.md section 2."},
		{"id":"b","title":"B","spec":"Only a spec."}]}`))
	require.NoError(t, err)
	require.Equal(t, "A title\n\nThe description.\n\nSee spec.md section 2.", r.Dispatch("a", nil).Message)
	require.Equal(t, "B\n\nOnly a spec.", r.Dispatch("b", nil).Message)
}

// Every bad file fails with a message naming the task and what is wrong.
func TestBadRunFiles(t *testing.T) {
	want := map[string]string{
		"empty.json":       "run: tasks: empty, a run needs at least one task",
		"duplicate.json":   "run: duplicate task id: a",
		"unknown-dep.json": "run: task b depends on unknown task zz",
		"self-dep.json":    "run: task a depends on itself",
		"cycle.json":       "run: circular dependency: a -> c -> b -> a",
		"bad-id.json":      `run: task tasks[0]: id: "../etc" must be 1-64 characters of A-Z a-z 0-9 _ -`,
		"no-title.json":    "run: task a: title: required",
		"complexity.json":  "run: task a: complexity: 11 must be between 1 and 10",
		"concurrency.json": "run: concurrency: 0 must be between 1 and 1000",
	}
	files, err := filepath.Glob("../testdata/runs/bad/*.json")
	require.NoError(t, err)
	require.Len(t, files, len(want), "every bad file has a case")
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		_, err = Parse(data)
		require.EqualError(t, err, want[filepath.Base(f)], f)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		``:                         "run: not a JSON object",
		`[1]`:                      "run: must be a JSON object",
		`{"title":`:                "run: not valid JSON",
		`{"title":"t","tasks":{}}`: "tasks: must be an array",
		`{"title":"t","concurrency":"3","tasks":[{"id":"a","title":"A"}]}`:   "concurrency: must be a whole number, got string",
		`{"title":"t","concurrency":1001,"tasks":[{"id":"a","title":"A"}]}`:  "concurrency: 1001 must be between 1 and 1000",
		`{"title":"t","tasks":[{"id":"a","title":"A","depends":"b"}]}`:       "run: task a: depends: must be an array, got string",
		`{"title":"t","tasks":[{"id":"a","title":"A","complexity":2.5}]}`:    "run: task a: complexity: must be a whole number, got 2.5",
		`{"title":"t","tasks":[{"id":"a","title":"A","complexity":0}]}`:      "run: task a: complexity: 0 must be between 1 and 10",
		`{"title":"t","tasks":[{"id":7,"title":"A"}]}`:                       "run: task tasks[0]: id: must be a string, got number",
		`{"title":"t","tasks":[{"title":"A"}]}`:                              "run: task tasks[0]: id: required",
		`{"title":"t","tasks":[{"id":"a","title":"A","skill":"Bad Skill"}]}`: "run: task a: skill:",
		`{"tasks":[{"id":"a","title":"A"}]}`:                                 "run: title: required",
		`{"title":"t","slug":"Not Kebab","tasks":[{"id":"a","title":"A"}]}`:  `run: slug: "Not Kebab" must be kebab-case`,
		`{"title":"t","tasks":[null]}`:                                       "run: task tasks[0]: must be an object, got null",
		`{"title":"t","tasks":[{"id":"a","title":"A"},"b"]}`:                 `run: task tasks[1]: must be an object, got "b"`,
	}
	for in, want := range cases {
		_, err := Parse([]byte(in))
		require.Error(t, err, in)
		require.Contains(t, err.Error(), want, in)
		var re *Error
		require.ErrorAs(t, err, &re, in)
	}
}

// All problems are reported at once, in file order.
func TestAllProblemsInFileOrder(t *testing.T) {
	_, err := Parse([]byte(`{"title":"t","concurrency":-1,"tasks":[
		{"id":"a","title":"A","depends":["b","ghost"]},
		{"id":"b","title":"","depends":["a"]},
		{"id":"a","title":"A2"}]}`))
	require.EqualError(t, err, "run: 5 problems:\n"+
		"  concurrency: -1 must be between 1 and 1000\n"+
		"  task b: title: required\n"+
		"  duplicate task id: a\n"+
		"  task a depends on unknown task ghost\n"+
		"  circular dependency: a -> b -> a")
}
