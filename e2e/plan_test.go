//go:build realserver

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// Every plan BuildPlan makes is accepted by the simulator's parser, an
// implementation of edda's plan rules written independently of mapping:
// the two must agree on what the real conductor accepts.
func TestGeneratedPlansPassTheConductorsParser(t *testing.T) {
	sim, err := devenv.Binary("eddasim")
	require.NoError(t, err)
	dirT, err := testrig.TemplatesDir()
	require.NoError(t, err)
	templates, err := mapping.LoadTemplates(os.DirFS(dirT))
	require.NoError(t, err)

	messages := []string{
		"Add user authentication with JWT.",
		`Quote "this" and 'that': key: value # not a comment {{ not a template }}`,
		"Line one\nline two\n\n- a list item\n  indented: yes",
		"Unicode: 認証を追加 — ünïcödé ✓ 🚀",
		"yes", "null", "~", "- starts like a list", "[not, a, list]",
	}
	taskIDs := []string{"T5", "t5", "task_42", "A-B-C", "x", "UPPER_lower-123"}
	dir := t.TempDir()
	n := 0
	for _, id := range taskIDs {
		for i, msg := range messages {
			d := testrig.Dispatch(t, id, msg)
			d.Skill = ""
			if i%3 == 1 {
				d.Skill = "review"
			}
			if i%2 == 1 {
				d.Artifacts = []mapping.Artifact{{ID: "T3", Title: "Setup: db", Summary: "PostgreSQL # JSONB\nmigrations"}}
			}
			if i%4 == 3 {
				d.RequiredSkills = []string{"coding-agent", "git"}
			}
			for _, attempt := range []int{1, 2} {
				tmpl, err := templates.Select(d)
				require.NoError(t, err)
				plan, err := mapping.BuildPlan(d, attempt, tmpl)
				require.NoError(t, err)
				data, err := mapping.MarshalPlan(plan)
				require.NoError(t, err)
				path := filepath.Join(dir, plan.Name+".yaml")
				require.NoError(t, os.WriteFile(path, data, 0o644))
				out, err := exec.Command(sim, "conduct", "run", path, "--cwd", dir, "--dry-run").CombinedOutput()
				require.NoError(t, err, "conductor rejected the plan for task %q message %q:\n%s\n%s", id, msg, out, data)
				n++
			}
		}
	}
	t.Logf("%d generated plans accepted", n)
}
