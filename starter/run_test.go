package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/runplan"
)

func TestRunPlanPrintsTheDryRun(t *testing.T) {
	data, err := os.ReadFile("../testdata/runs/sample.json")
	require.NoError(t, err)
	r, err := runplan.Parse(data)
	require.NoError(t, err)

	code, out, errOut := cliRun(t, "run", "plan", "../testdata/runs/sample.json")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	lines := strings.Split(out, "\n")
	require.Equal(t, "run "+r.Slug+": User profiles", lines[0])
	require.Equal(t, "workflow karvi-run-"+r.Slug+", concurrency 2, 6 tasks in 3 levels", lines[1])
	require.Contains(t, out, "start order:\n  1: schema lint\n  2: api ui changelog\n  3: e2e\n")
	rows := map[string][]string{}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 6 {
			rows[f[0]] = f[1:]
		}
	}
	phases := "implement,test,docs"
	require.Equal(t, []string{"sonnet", "-", "karvi-schema", "(default)", phases}, rows["schema"])
	require.Equal(t, []string{"opus", "schema", "karvi-api", "(default)", phases}, rows["api"], "complexity 6 runs on opus")
	require.Equal(t, []string{"opus", "api,ui", "karvi-e2e", "(default)", phases}, rows["e2e"], "modelHint wins; depends and blocked_by joined")
	require.Len(t, rows, 6, "six tasks")
}

func TestRunPlanReadsStdinAndTemplates(t *testing.T) {
	dir := t.TempDir()
	tmpl, err := os.ReadFile("../testdata/templates/review.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "review.yaml"), tmpl, 0o644))
	in := `{"title":"Review run","tasks":[{"id":"r1","title":"Review it","skill":"review"},{"id":"r2","title":"Then this","depends":["r1"]}]}`

	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"run", "plan", "-templates", dir, "-"}, strings.NewReader(in), &out))
	require.Regexp(t, `r1 +sonnet +- +karvi-r1-[0-9a-f]{6} \(review\) +review,fix,verify\n`, out.String())
	require.Regexp(t, `r2 +sonnet +r1 +karvi-r2-[0-9a-f]{6} \(default\) +implement,test,docs\n`, out.String())

	// Without the review template the task asking for it is named.
	out.Reset()
	err = run(context.Background(), []string{"run", "plan", "-"}, strings.NewReader(in), &out)
	require.ErrorContains(t, err, `task r1: dispatch plan: skill: no plan template named "review"`)
	require.Empty(t, out.String())
}

// A bad run file exits 1 with the error naming the task, and prints nothing
// on stdout.
func TestRunPlanRejectsBadRunFiles(t *testing.T) {
	cases := map[string]string{
		"cycle.json":       "circular dependency: a -> c -> b -> a",
		"duplicate.json":   "duplicate task id: a",
		"unknown-dep.json": "task b depends on unknown task zz",
		"complexity.json":  "task a: complexity: 11 must be between 1 and 10",
		"no-title.json":    "task a: title: required",
	}
	for file, want := range cases {
		code, out, errOut := cliRun(t, "run", "plan", "../testdata/runs/bad/"+file)
		require.Equal(t, 1, code, file)
		require.Empty(t, out, file)
		require.Equal(t, "starter: run: "+want+"\n", errOut, file)
	}
	code, _, errOut := cliRun(t, "run", "plan", "../testdata/runs/none.json")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "read run file")
}

func TestRunPlanCommandLine(t *testing.T) {
	inv, err := parseArgs([]string{"-address", "a:1", "run", "plan", "f.json", "-templates", "/t"})
	require.NoError(t, err)
	require.Equal(t, "run plan", inv.cmd.name)
	require.Equal(t, "f.json", inv.arg)
	require.Equal(t, "/t", inv.opts.(*templatesOpts).templates)

	code, out, _ := cliRun(t, "help", "run", "plan")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Usage: starter run plan [flags] <run.json|->")

	for args, want := range map[string]string{
		"run plan":   "run plan takes exactly one argument, <run.json|->; got 0",
		"run":        `unknown command "run"`,
		"run launch": `unknown command "run"`,
	} {
		code, out, errOut := cliRun(t, strings.Fields(args)...)
		require.Equal(t, 2, code, args)
		require.Empty(t, out, args)
		require.Contains(t, errOut, want, args)
	}
}
