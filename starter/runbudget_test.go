package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/costs"
)

// `run budget set <slug> -budget N` is a command of three words; its
// request carries the new limit and the action (empty: keep the run's).
func TestRunBudgetSetParses(t *testing.T) {
	inv, err := parseArgs([]string{"run", "budget", "set", "sprint", "-budget", "12.5"})
	require.NoError(t, err)
	require.Equal(t, "run budget set", inv.cmd.name)
	require.Equal(t, "sprint", inv.arg)
	req, err := runBudgetRequest(*inv.opts.(*budgetChangeOpts))
	require.NoError(t, err)
	require.Equal(t, runapi.BudgetRequest{LimitUSD: 12.5}, req)

	inv, err = parseArgs([]string{"run", "budget", "set", "-budget-action", "warn", "-budget", "3", "sprint"})
	require.NoError(t, err)
	req, err = runBudgetRequest(*inv.opts.(*budgetChangeOpts))
	require.NoError(t, err)
	require.Equal(t, runapi.BudgetRequest{LimitUSD: 3, Action: costs.Warn}, req)

	// The task's command is still two words.
	inv, err = parseArgs([]string{"budget", "set", "-budget", "3", "T5"})
	require.NoError(t, err)
	require.Equal(t, "budget set", inv.cmd.name)
}

func TestRunBudgetSetRefusesABadBudget(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "budget", "set", "sprint"}, "budget: limitUsd: 0 must be a positive amount"},
		{[]string{"run", "budget", "set", "-budget", "3", "-budget-action", "stop", "sprint"}, `budget: action: "stop" must be`},
		{[]string{"run", "budget", "set", "-budget", "3"}, "run budget set takes exactly one argument, <slug>; got 0"},
	} {
		code, out, errOut := cliRun(t, c.args...)
		require.Equal(t, 2, code, "%v: %s", c.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, c.want, "%v", c.args)
	}
}
