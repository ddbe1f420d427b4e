//go:build realserver

package e2e

import (
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// A phase whose checks always fail spends an agent call on every attempt:
// the conductor adds each to state.json's total before the checks run,
// and no event carries it. The brief's total is the conductor's, its
// phases add up to it, and `starter cost` shows shares that sum to 100 %.
func TestFailedAttemptsCountInTheBrief(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "fail=always cost=0.10"})
	res := r.Result(r.Start(testrig.Dispatch(t, "spend-fail", "Fail the checks.")))
	require.Equal(t, mapping.TaskBlocked, res.Outcome.TaskStatus)

	cs := conductorState(t, r, "spend-fail", res.PlanName)
	require.InDelta(t, 0.30, cs.TotalCostUSD, 1e-9, "three attempts at $0.10")
	require.NotNil(t, res.Brief.Cost.TotalUSD, "the brief has a total")
	require.InDelta(t, cs.TotalCostUSD, *res.Brief.Cost.TotalUSD, 1e-9)
	var sum float64
	for _, c := range res.Brief.Cost.ByPhase {
		sum += c
	}
	require.InDelta(t, cs.TotalCostUSD, sum, 1e-9, "by phase: %v", res.Brief.Cost.ByPhase)
	cost, _ := r.FileBrief("spend-fail")["cost"].(map[string]any)
	require.InDelta(t, cs.TotalCostUSD, cost["total_usd"], 1e-9, "the sink's brief")

	bin, err := devenv.Binary("starter")
	require.NoError(t, err)
	out, err := exec.Command(bin, "-address", r.Server.Addr, "cost", "spend-fail").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "spent $0.30")
	requireSharesSumTo100(t, string(out))
}

// requireSharesSumTo100 adds up the SHARE column of each table `starter
// cost` prints.
func requireSharesSumTo100(t *testing.T, out string) {
	t.Helper()
	tables := regexp.MustCompile(`(?m)^\s*(PHASE|TASK|MODEL|SKILL)\s+USD\s+SHARE`).FindAllStringIndex(out, -1)
	require.NotEmpty(t, tables, out)
	row := regexp.MustCompile(`(?m)^\s*(\S+)\s+\$[0-9.]+\s+([0-9]+)%\s*$`)
	for i, tb := range tables {
		end := len(out)
		if i+1 < len(tables) {
			end = tables[i+1][0]
		}
		total := 0
		for _, m := range row.FindAllStringSubmatch(out[tb[1]:end], -1) {
			n, _ := strconv.Atoi(m[2])
			total += n
		}
		require.InDelta(t, 100, total, 1, "shares of table %d:\n%s", i, out)
	}
}

// A $0.30 block budget stops a task whose checks keep failing once its
// attempts' spending passes it: failed attempts count.
func TestTaskBudgetCountsFailedAttempts(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "fail=always delay=1s cost=0.20"})
	run := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "spend-bud", "Fail expensively."),
		Budget: &costs.Budget{LimitUSD: 0.3, Action: costs.Block},
		Tuning: &taskapi.Tuning{CheckpointEvery: 100 * time.Millisecond}})
	res := r.Result(run)
	require.Equal(t, mapping.TaskBlocked, res.Outcome.TaskStatus)
	require.Regexp(t, `^Budget exceeded \(\$0\.[4-6]0 spent of \$0\.30\)$`, res.Outcome.LastError)
	r.AssertNoOrphans()
}
