//go:build realserver

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// A task whose test phase fails once and then passes, seen as a job: the
// starter's JSON has one succeeded attempt whose verdict holds the failed
// try and the passing one, the report starts with the verdict's line, and
// the attempt's metrics.json in its run directory says the same.
func TestJobViewOfATaskThatPassesOnItsSecondTry(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	r.Workspace("T12")
	res := r.Result(r.Start(testrig.Dispatch(t, "T12",
		"Add user authentication with JWT. "+testrig.ExampleCosts+" [sim phase=test fail=1]")))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	starter, err := devenv.Binary("starter")
	require.NoError(t, err)

	out, err := runCmd(starter, "job", "-address", r.Server.Addr, "T12")
	require.NoError(t, err, out)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw), out)
	require.Equal(t, map[string]any{"status": "succeeded", "attempt": 1.0, "diff_path": ""}, raw["state"])
	require.Equal(t, res.PlanName, raw["plan_id"])
	var job jobview.Job
	require.NoError(t, json.Unmarshal([]byte(out), &job))
	require.Len(t, job.Attempts, 1)
	a := job.Attempts[0]
	require.Equal(t, jobview.ResultSucceeded, a.Result.Status)
	require.Equal(t, r.TaskDir("T12"), a.WorktreePath)
	require.True(t, a.Verdict.Passed)
	var results []string
	for _, tr := range a.Verdict.TestResults {
		results = append(results, tr.Name+" "+tr.Status)
	}
	require.Equal(t, []string{
		"implement: git_clean passed",
		"test: cmd_succeeds `cargo test` (try 1) failed",
		"test: cmd_succeeds `cargo test` (try 2) passed",
		`docs: file_contains README.md "auth" passed`,
	}, results)
	require.Contains(t, *a.Verdict.TestResults[1].Output, "simulated check failure (attempt 1)")
	require.Equal(t, []string{"test try 1 failed: cmd `cargo test` exited 1: eddasim: simulated check failure (attempt 1)"}, a.Verdict.Logs)
	require.Equal(t, 1, job.Metrics.RetryCount)
	require.InDelta(t, *res.Brief.Cost.TotalUSD, job.Metrics.Cost.TotalUSD, 1e-6, "the job cost what the brief says")
	require.Nil(t, job.Metrics.TokenUsage, "the simulator reports no tokens")
	require.Len(t, job.Metrics.StepMetrics, 3)
	require.Equal(t, 2, job.Metrics.StepMetrics[1].Tries)
	// Both tries of the test phase cost $0.42 (the failed one too), and the
	// steps add up to the job's cost.
	require.InDelta(t, 0.84, job.Metrics.StepMetrics[1].CostUSD, 1e-9)
	var steps float64
	for _, s := range job.Metrics.StepMetrics {
		steps += s.CostUSD
	}
	require.InDelta(t, job.Metrics.Cost.TotalUSD, steps, 1e-6, "the steps add up to the job's cost")

	out, err = runCmd(starter, "job", "-report", "-address", r.Server.Addr, "T12")
	require.NoError(t, err, out)
	lines := strings.Split(out, "\n")
	require.Regexp(t, regexp.MustCompile(`^3 passed, 1 failed, 4 total in \d+ms$`), lines[0])
	require.Contains(t, out, "job T12 succeeded at attempt 1")
	require.Contains(t, out, "  failed test: cmd_succeeds `cargo test` (try 1): cmd `cargo test` exited 1")
	require.Regexp(t, regexp.MustCompile(`(?m)^test +\S+ +\$0\.84 +2$`), out)
	require.Regexp(t, regexp.MustCompile(`(?m)^docs +\S+ +\$0\.18 +1$`), out)

	path := filepath.Join(r.WorkRoot, "runs", "T12", res.PlanName, "metrics.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var m jobview.Metrics
	require.NoError(t, json.Unmarshal(data, &m))
	require.Equal(t, "T12", m.JobID)
	require.Equal(t, 1, m.Attempt)
	require.Equal(t, 1, m.RetryCount)
	require.Equal(t, job.Metrics.Cost, m.Cost)
	require.Equal(t, job.Metrics.StepMetrics, m.StepMetrics)
	require.Contains(t, a.Verdict.Artifacts, path)
}
