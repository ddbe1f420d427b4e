package taskact

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/mapping/redact"
	"karvi-edda-temporal/testkit/wait"
)

// The tally travels with delivery: folded over two checkpoints (the second
// taking up the first's tally) it is the tally of the whole stored log and
// the final state.json, secrets redacted; the attempt's end writes
// metrics.json into the run directory, and a retried delivery writes the
// same file again.
func TestDeliveryCarriesTheTallyAndWritesMetrics(t *testing.T) {
	root := t.TempDir()
	cwd := filepath.Join(root, "tasks", "T5")
	runDir := filepath.Join(root, "runs", "T5", "karvi-t5-020d01")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	require.NoError(t, os.MkdirAll(runDir, 0o755))
	planYAML, err := os.ReadFile("../../testdata/examples/B/plan.yaml")
	require.NoError(t, err)
	plan := PlanInfo{Summary: mapping.PlanSummary{Name: "karvi-t5-020d01", PhaseIDs: []string{"implement", "test", "docs"}},
		PlanPath: filepath.Join(runDir, "plan.yaml"), Cwd: cwd, RunDir: runDir,
		EventsPath: filepath.Join(cwd, "events.jsonl"), StatePath: filepath.Join(cwd, "state.json")}
	require.NoError(t, os.WriteFile(plan.PlanPath, planYAML, 0o644))

	// Example B, its first try of test reporting tokens, its state.json
	// quoting a secret the check printed.
	log, err := os.ReadFile("../../testdata/examples/B/events.snake.jsonl")
	require.NoError(t, err)
	lines := strings.SplitAfter(strings.TrimSpace(string(log)), "\n")
	lines[4] = strings.Replace(lines[4], `"duration_ms"`, `"input_tokens":300,"output_tokens":40,"duration_ms"`, 1)
	first, rest := strings.Join(lines[:4], ""), strings.Join(lines[4:], "")+"\n"
	require.NoError(t, os.WriteFile(plan.EventsPath, []byte(first), 0o644))
	state, err := os.ReadFile("../../testdata/examples/B/state.json")
	require.NoError(t, err)
	state = []byte(strings.Replace(string(state), `"detail": "cmd `+"`cargo test`"+` exited 1"`,
		`"detail": "cmd `+"`cargo test`"+` exited 1: token=ghp_abcdefghijklmnopqrstuvwxyz0123456789"`, 1))
	require.NoError(t, os.WriteFile(filepath.Join(root, "rest.jsonl"), []byte(rest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "final-state.json"), state, 0o644))

	// The conductor writes the rest of the log and its state when told to.
	gate := filepath.Join(root, "go")
	conductor := filepath.Join(root, "edda")
	script := "#!/bin/sh\nwhile [ ! -e " + gate + " ]; do sleep 0.01; done\n" +
		"cat " + filepath.Join(root, "rest.jsonl") + " >> " + plan.EventsPath + "\n" +
		"cp " + filepath.Join(root, "final-state.json") + " " + plan.StatePath + "\n"
	require.NoError(t, os.WriteFile(conductor, []byte(script), 0o755))

	files, err := sink.NewFile(filepath.Join(root, "sink"))
	require.NoError(t, err)
	a := &Activities{Config: activities.Config{WorkRoot: root, Conductor: conductor}, Sink: files}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.StartConductor, StartRequest{Plan: plan})
	require.NoError(t, err)
	var h ConductorHandle
	require.NoError(t, v.Get(&h))

	brief := mapping.NewBriefState("T5", plan.Summary)
	deliver := func(req DeliverRequest) DeliverResult {
		t.Helper()
		v, err := env.ExecuteActivity(a.DeliverEvents, req)
		require.NoError(t, err)
		var res DeliverResult
		require.NoError(t, v.Get(&res))
		return res
	}
	seed := a.newTally(plan, 1, nil, false)
	req := DeliverRequest{TaskID: "T5", Plan: plan, Handle: h, Brief: brief, TaskStatus: mapping.TaskInProgress, Job: seed}
	cp := deliver(req)
	require.False(t, cp.Exited)
	require.NotNil(t, cp.Job)
	require.Equal(t, "test", cp.Job.Current, "the first checkpoint saw test start")
	_, err = os.Stat(filepath.Join(runDir, MetricsFile))
	require.True(t, os.IsNotExist(err), "no metrics before the attempt ends")

	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	waitGone(t, h)
	req.Cursor, req.Brief, req.Job = cp.Next, cp.Brief, cp.Job
	end := deliver(req)
	require.True(t, end.Exited)

	// The same as one pass over the stored log and state.json.
	stored, err := os.ReadFile(plan.EventsPath)
	require.NoError(t, err)
	p, err := mapping.ParsePlan(planYAML)
	require.NoError(t, err)
	want := jobview.NewTally(jobview.Seed{Plan: &p, Attempt: 1, Worktree: cwd})
	want.ObserveLog(redact.JSON(stored))
	st, err := jobview.ParseState(redact.JSON(state))
	require.NoError(t, err)
	want.ObserveState(st)
	want.Artifacts = []string{plan.EventsPath, plan.StatePath, filepath.Join(runDir, MetricsFile)}
	require.Equal(t, toJSON(t, want), toJSON(t, end.Job))
	require.NotContains(t, string(toJSON(t, end.Job)), "ghp_abcdef")
	require.Equal(t, []mapping.Usage{{InputTokens: 300, OutputTokens: 40}}, end.Job.Usage)

	metrics, err := os.ReadFile(filepath.Join(runDir, MetricsFile))
	require.NoError(t, err)
	var m jobview.Metrics
	require.NoError(t, json.Unmarshal(metrics, &m))
	require.Equal(t, want.Metrics("T5", ""), m)
	require.Equal(t, 1, m.Attempt)
	require.Equal(t, 2, m.RetryCount)

	// A retry of the last delivery, from the same checkpoint: same file.
	again := deliver(req)
	require.Equal(t, toJSON(t, end.Job), toJSON(t, again.Job))
	metricsAgain, err := os.ReadFile(filepath.Join(runDir, MetricsFile))
	require.NoError(t, err)
	require.Equal(t, metrics, metricsAgain)
	left, err := filepath.Glob(filepath.Join(runDir, ".metrics-*"))
	require.NoError(t, err)
	require.Empty(t, left, "no temporary file left behind")
}

func waitGone(t *testing.T, h ConductorHandle) {
	t.Helper()
	// 30 s is a safety net, not a timing test.
	wait.EventuallyEvery(t, 30*time.Second, 10*time.Millisecond, "the conductor to exit", func() (any, bool) {
		st, err := proc.Inspect(h.proc())
		require.NoError(t, err)
		return st, !st.Alive
	})
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}

// Check names quote the plan's commands; the tally, bound for history,
// carries them redacted.
func TestTallyCheckNamesAreRedacted(t *testing.T) {
	dir := t.TempDir()
	planPath := filepath.Join(dir, "plan.yaml")
	require.NoError(t, os.WriteFile(planPath, []byte(`name: karvi-t5
phases:
  - id: test
    prompt: x
    check:
      - type: cmd_succeeds
        cmd: 'curl -H "Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123456789" https://ci'
`), 0o644))
	a := &Activities{}
	tl := a.newTally(PlanInfo{PlanPath: planPath}, 1, nil, false)
	require.Len(t, tl.Phases, 1)
	require.Len(t, tl.Phases[0].Checks, 1)
	require.NotContains(t, tl.Phases[0].Checks[0], "ghp_abcdef")
	require.Contains(t, tl.Phases[0].Checks[0], "cmd_succeeds `curl")
}
