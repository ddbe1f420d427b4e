package taskact

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/mapping"
)

// A conductor run with --json copies every event to stdout and says why it
// stopped on stderr. Once it is gone the tail hands back its stderr, and
// only the human lines of its stdout, so a crash reason names the cause
// instead of quoting events.
func TestTailOfADeadConductorKeepsStderrApartFromEvents(t *testing.T) {
	root := t.TempDir()
	cwd := filepath.Join(root, "tasks", "T5")
	runDir := filepath.Join(root, "runs", "T5", "karvi-t5")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	events := filepath.Join(cwd, "events.jsonl")
	conductor := filepath.Join(root, "edda")
	script := `#!/bin/sh
ev='{"seq":0,"ts":"2026-02-28T03:00:01Z","type":"phase_start","phase_id":"test","attempt":1}'
echo "$ev" >> ` + events + `
echo "$ev"
echo '▶ [2/3] Phase "test" (attempt 1)'
echo "panic: lost the agent, token=ghp_abcdefghijklmnopqrstuvwxyz0123456789" >&2
echo '{"seq":1,"ts":"2026-02-28T03:00:02Z","type":"agent_progress"}'
exit 3
`
	require.NoError(t, os.WriteFile(conductor, []byte(script), 0o755))

	a := &Activities{Config: activities.Config{WorkRoot: root, Conductor: conductor}}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	plan := PlanInfo{Summary: mapping.PlanSummary{Name: "karvi-t5"}, PlanPath: filepath.Join(runDir, "plan.yaml"),
		Cwd: cwd, RunDir: runDir, EventsPath: events, StatePath: filepath.Join(cwd, "state.json")}
	v, err := env.ExecuteActivity(a.StartConductor, StartRequest{Plan: plan})
	require.NoError(t, err)
	var h ConductorHandle
	require.NoError(t, v.Get(&h))
	require.NotEmpty(t, h.StderrPath)

	waitGone(t, h) // a safety deadline, not a timing test
	v, err = env.ExecuteActivity(a.TailEvents, TailRequest{Plan: plan, Handle: h})
	require.NoError(t, err)
	var res TailResult
	require.NoError(t, v.Get(&res))
	require.True(t, res.Exited)
	require.Equal(t, 3, res.ExitCode)
	require.Len(t, res.Events, 1)
	require.True(t, strings.HasPrefix(res.Stderr, "panic: lost the agent, token="), res.Stderr)
	require.Contains(t, res.Stderr, "***REDACTED***")
	require.NotContains(t, res.Stderr, "ghp_abcdef")
	require.Equal(t, `▶ [2/3] Phase "test" (attempt 1)`, res.LogTail, "stdout without its event lines")

	o := mapping.ExitOutcome(mapping.ConductorExit{ExitCode: res.ExitCode, State: res.State,
		StateError: res.StateError, Stderr: res.Stderr, Output: res.LogTail}, mapping.BriefState{}, plan.Summary)
	require.Contains(t, o.LastError, "; stderr: panic: lost the agent")
	require.Contains(t, o.LastError, "(exit code 3)")
	require.NotContains(t, o.LastError, `"seq"`)
}

func TestLogTailLeavesOutEventLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "conductor.log")
	// A run recorded before stderr had a file of its own: both outputs mixed.
	mixed := `{"seq":0,"type":"plan_start"}
{"Seq": 3, "Type": "PhaseStart"}
eddasim: simulated conductor crash in phase "test" (attempt 1)
{"seq":4,"ts":"2026-02-28T03:00:0
`
	require.NoError(t, os.WriteFile(path, []byte(mixed), 0o644))
	require.Equal(t, `eddasim: simulated conductor crash in phase "test" (attempt 1)`, readLogTail(path))
	require.Empty(t, readLogTail(filepath.Join(dir, "missing")))
	require.Empty(t, readLogTail(""))

	var many strings.Builder
	for i := range 5 {
		many.WriteString("line " + string(rune('a'+i)) + "\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(many.String()), 0o644))
	require.Equal(t, "line c | line d | line e", readLogTail(path), "the last three lines")
}
