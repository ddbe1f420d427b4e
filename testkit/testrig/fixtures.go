//go:build realserver

package testrig

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
)

// Fixtures: example A (testdata/examples/A, a three-phase task as the
// karvi<->edda contract in docs/contract.md maps it: its dispatch, its
// final brief and its PATCH sequence), a task workspace the default checks
// pass in, and briefs compared without what depends on the clock.

// ExampleCosts makes the simulator report example A's cost for each phase.
const ExampleCosts = "[sim phase=implement cost=0.85] [sim phase=test cost=0.42] [sim phase=docs cost=0.18]"

// ExampleDir is testdata/examples/A.
func ExampleDir(t testing.TB) string {
	t.Helper()
	root, err := devenv.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(root, "testdata", "examples", "A")
}

// TemplatesDir holds the repository's plan templates, among them
// "sequential": implement, test, docs with docs after test, the order in
// which edda (ties broken by phase id) reproduces example A.
func TemplatesDir() (string, error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "testdata", "templates"), nil
}

// Dispatch is example A's DispatchPlan for taskID with message, on the
// "sequential" template.
func Dispatch(t testing.TB, taskID, message string) mapping.DispatchPlan {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ExampleDir(t), "dispatch.json"))
	require.NoError(t, err)
	d, err := mapping.ParseDispatchPlan(data)
	require.NoError(t, err)
	d.TaskID, d.Message, d.Skill = taskID, message, "sequential"
	return d
}

// ExampleBrief is example A's final brief, normalized.
func ExampleBrief(t testing.TB) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ExampleDir(t), "brief.json"))
	require.NoError(t, err)
	return NormalizeBrief(t, data)
}

// ExampleBriefFor is example A's final brief for another task and plan
// name, normalized: what an undisturbed run of the example ends with.
func ExampleBriefFor(t testing.TB, taskID, planName string) map[string]any {
	t.Helper()
	b := ExampleBrief(t)
	b["meta"].(map[string]any)["taskId"] = taskID
	b["plan"].(map[string]any)["name"] = planName
	return b
}

// ExamplePatches are example A's PATCH bodies after the skeleton, one per
// event, in order, as decoded from its patches.jsonl.
func ExamplePatches(t testing.TB) []map[string]any {
	t.Helper()
	return ReadJSONL(t, filepath.Join(ExampleDir(t), "patches.jsonl"))
}

// ExamplePatchesFor are ExamplePatches of an attempt named planName: the
// example's plan name, which has no workflow chain's nonce, replaced.
func ExamplePatchesFor(t testing.TB, planName string) []map[string]any {
	t.Helper()
	ps := ExamplePatches(t)
	for _, p := range ps {
		if plan, ok := p["plan"].(map[string]any); ok && plan["name"] != nil {
			plan["name"] = planName
		}
	}
	return ps
}

// GitWorkspace makes dir a git repository with a README that mentions auth,
// so the "sequential" template's real checks (git_clean, file_contains
// README.md "auth", and cargo test through a stub on PATH) can pass in it.
func GitWorkspace(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n\nJWT auth middleware.\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "README.md"},
		{"-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-q", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v in %s: %v: %s", args, dir, err, out)
		}
	}
	return nil
}

// NormalizeBrief decodes a brief and drops what depends on the clock (see
// Normalize), so a live run compares with example A.
func NormalizeBrief(t testing.TB, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	return Normalize(m).(map[string]any)
}

var secondsInDetail = regexp.MustCompile(`\(\d+s, `)

// Normalize drops times and durations (also the durations inside log
// details) at any depth, and rounds numbers to 1e-6 because sums of costs
// may differ in the last bit.
func Normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			switch k {
			case "startedAt", "completedAt", "duration_ms", "time", "updatedAt", "ts":
				continue
			case "detail":
				if s, ok := val.(string); ok {
					val = secondsInDetail.ReplaceAllString(s, "(Ns, ")
				}
			}
			out[k] = Normalize(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Normalize(e)
		}
		return out
	case float64:
		return float64(int64(x*1e6+0.5)) / 1e6
	default:
		return v
	}
}

// DropNulls removes null members of objects, at any depth.
func DropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if val != nil {
				out[k] = DropNulls(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = DropNulls(e)
		}
		return out
	default:
		return v
	}
}

// JSONValue round-trips v through JSON into maps and slices.
func JSONValue(t testing.TB, v any) any {
	t.Helper()
	var out any
	require.NoError(t, json.Unmarshal(MustJSON(t, v), &out))
	return out
}

// MustJSON marshals v.
func MustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}
