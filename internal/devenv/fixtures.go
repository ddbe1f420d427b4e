package devenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"karvi-edda-temporal/mapping"
)

// Fixtures shared by the end-to-end tests, the fault suite and the
// benchmarks: the seed's dispatch, a task workspace the default checks pass
// in, and briefs compared without what depends on the clock.

// TemplatesDir holds the repository's plan templates, among them
// "sequential": the seed's phases with docs after test, the order in which
// edda (ties broken by phase id) reproduces the seed's example A.
func TemplatesDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "testdata", "templates"), nil
}

// SeedDispatch is seed example A's DispatchPlan for taskID with message, on
// the "sequential" template.
func SeedDispatch(taskID, message string) (mapping.DispatchPlan, error) {
	root, err := RepoRoot()
	if err != nil {
		return mapping.DispatchPlan{}, err
	}
	data, err := os.ReadFile(filepath.Join(root, "testdata", "examples", "A", "dispatch.json"))
	if err != nil {
		return mapping.DispatchPlan{}, err
	}
	d, err := mapping.ParseDispatchPlan(data)
	if err != nil {
		return mapping.DispatchPlan{}, err
	}
	d.TaskID, d.Message, d.Skill = taskID, message, "sequential"
	return d, nil
}

// GitWorkspace makes dir a git repository with a README that mentions auth,
// so the seed template's real checks (git_clean, file_contains README.md
// "auth", and cargo test through a stub on PATH) can pass in it.
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

// ReadJSONL decodes a file of JSON objects, one per line; blank lines are
// skipped.
func ReadJSONL(path string) ([]map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%s: line %q: %w", path, sc.Text(), err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// NormalizeBrief decodes a brief and drops what depends on the clock, so a
// live run compares with the seed's example.
func NormalizeBrief(data []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return Normalize(m).(map[string]any), nil
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
