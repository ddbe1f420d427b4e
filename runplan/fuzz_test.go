package runplan

import (
	"os"
	"path/filepath"
	"testing"

	"karvi-edda-temporal/mapping"
)

// FuzzParse: Parse never panics, and a run it accepts keeps its promises:
// a valid slug, an order holding every task once after its dependencies,
// and a dispatch per task that builds a plan.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../testdata/runs/*.json")
	bad, _ := filepath.Glob("../testdata/runs/bad/*.json")
	for _, name := range append(files, bad...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"title":"Ünï ✓","tasks":[{"id":"a","title":"A","blocked_by":["b"]},{"id":"b","title":"B","complexity":5}]}`))
	ts, err := mapping.LoadTemplates(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		if !slugPattern.MatchString(r.Slug) || len(r.Slug) > MaxSlugLen {
			t.Fatalf("slug %q", r.Slug)
		}
		level := map[string]int{}
		for i, ids := range r.Order() {
			for _, id := range ids {
				if _, twice := level[id]; twice {
					t.Fatalf("%s ordered twice", id)
				}
				level[id] = i
			}
		}
		if len(level) != len(r.Tasks) {
			t.Fatalf("order holds %d of %d tasks", len(level), len(r.Tasks))
		}
		for _, task := range r.Tasks {
			for _, dep := range task.Depends {
				if level[dep] >= level[task.ID] {
					t.Fatalf("%s at level %d does not come after %s at %d", task.ID, level[task.ID], dep, level[dep])
				}
			}
			d := r.Dispatch(task.ID, []Upstream{{ID: "up", Summary: "done"}})
			tmpl, err := ts.Select(d)
			if err != nil {
				continue // a skill no template is named for: the run's starter reports it
			}
			if _, err := mapping.BuildPlan(d, 1, tmpl); err != nil {
				t.Fatalf("task %s: %v", task.ID, err)
			}
		}
	})
}

func FuzzDeriveSlug(f *testing.F) {
	for _, s := range []string{"", "User profiles", "a-abc123", "ß", "--x--"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, title string) {
		s := DeriveSlug(title)
		if !slugPattern.MatchString(s) || len(s) > MaxSlugLen {
			t.Fatalf("DeriveSlug(%q) = %q", title, s)
		}
	})
}
