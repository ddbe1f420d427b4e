package testrig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStreamProblemsReplaysEveryStream(t *testing.T) {
	dir := t.TempDir()
	line := func(agent, state, typ, payload string) string {
		return `{"ts":"2026-01-01T00:00:00Z","run_id":"run-T1","provider":"system","agent_id":"` + agent +
			`","role":"executor","state":"` + state + `","type":"` + typ + `"` + payload + "}\n"
	}
	good := line("a", "running", "state_change", `,"payload":{"from":"idle","to":"running"}`) +
		line("a", "error", "error", "") + line("a", "failed", "error", "")
	bad := line("a", "running", "state_change", `,"payload":{"from":"idle","to":"running"}`) +
		line("a", "failed", "error", "") +
		line("b", "blocked", "state_change", `,"payload":{"from":"blocked","to":"blocked"}`) +
		"not json\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run-good.jsonl"), []byte(good), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run-bad.jsonl"), []byte(bad), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.jsonl"), []byte("junk\n"), 0o644))
	problems, err := StreamProblems(dir)
	require.NoError(t, err)
	require.Len(t, problems, 3, "%v", problems)
	require.Contains(t, problems[0], "run-bad.jsonl:2: transition: state: agent a: running -> failed")
	require.Contains(t, problems[1], "run-bad.jsonl:3: transition: state: agent b: a state_change from blocked to blocked")
	require.Contains(t, problems[2], "run-bad.jsonl:4:")

	none, err := StreamProblems(filepath.Join(dir, "missing"))
	require.NoError(t, err)
	require.Empty(t, none)
}
