package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/intent"
)

func TestScheduleFlagsParse(t *testing.T) {
	inv, err := parseArgs([]string{"schedule", "create", "-name", "nightly", "-cron", "0 2 * * *", "-tz", "Europe/Paris",
		"../testdata/sample/dispatch.json", "-max-runs", "5", "-until", "task_completed", "-catch-up", "2", "-overflow", "defer",
		"-min-interval", "90s", "-max-errors", "4", "-owner", "ana"})
	require.NoError(t, err)
	require.Equal(t, "schedule create", inv.cmd.name)
	require.Equal(t, "../testdata/sample/dispatch.json", inv.arg)
	s := *inv.opts.(*scheduleOptions)
	require.Equal(t, scheduleOptions{name: "nightly", cron: "0 2 * * *", tz: "Europe/Paris", maxRuns: 5, until: "task_completed",
		catchUp: 2, overflow: "defer", minInterval: 90 * time.Second, maxErrors: 4, owner: "ana", set: s.set}, s)
	require.Len(t, s.set, 10)

	inv, err = parseArgs([]string{"schedule", "update", "nightly", "-cron", "@hourly"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"cron": true}, inv.opts.(*scheduleOptions).set, "update knows which flags were given")

	inv, err = parseArgs([]string{"schedule", "list", "-json"})
	require.NoError(t, err)
	require.True(t, inv.opts.(*scheduleListOpts).json)
	require.Empty(t, inv.args)
}

func TestScheduleUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"schedule", "list", "x"}, `schedule list takes no argument; got ["x"]`},
		{[]string{"schedule", "create", "-max-runs", "many", "f.json"}, `invalid value "many" for flag -max-runs: want a whole number`},
		{[]string{"schedule", "create", "-min-interval", "soon", "f.json"}, `invalid value "soon" for flag -min-interval`},
		{[]string{"schedule", "pause"}, "schedule pause takes exactly one argument, <name>; got 0"},
		{[]string{"schedule", "update", "nightly"}, "nothing to change"},
		{[]string{"schedule", "frob", "x"}, `unknown command "schedule"`},
	} {
		code, out, errOut := cliRun(t, c.args...)
		require.Equal(t, 2, code, "%v: %s", c.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, c.want, "%v", c.args)
		require.Equal(t, 1, strings.Count(errOut, "Usage:"), "%v", c.args)
	}
}

// A bad intent is refused before the starter reaches for Temporal (the
// address here serves nothing), each problem naming its field.
func TestScheduleCreateRefusesBadInputOffline(t *testing.T) {
	const dispatch = "../testdata/sample/dispatch.json"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-run-at", "+1h", "-cron", "@hourly", dispatch}, []string{"run_at: run_at and cron are mutually exclusive"}},
		{[]string{"-cron", "0 25 * * *", dispatch}, []string{"cron: hour: 25 is out of range 0-23"}},
		{[]string{"-cron", "@daily", "-tz", "Mars/Olympus", dispatch}, []string{`time_zone: unknown time zone "Mars/Olympus"`}},
		{[]string{"-cron", "*/5 * * * * * *", dispatch}, []string{"more often than min_interval 1m0s"}},
		{[]string{"-cron", "@daily", "-until", "done", "-overflow", "later", dispatch}, []string{`until: at 1: unknown predicate "done"`, `overflow: "later" must be skip or defer`}},
		{[]string{"-run-at", "+1h", "-max-runs", "2", dispatch}, []string{"max_runs: 2: a run_at intent fires once"}},
		{[]string{"-cron", "@daily", "../testdata/runs/bad/cycle.json"}, []string{"circular dependency"}},
		{[]string{"-cron", "@daily", "no-such-file.json"}, []string{"read target"}},
	} {
		args := append([]string{"-address", "127.0.0.1:1", "schedule", "create", "-name", "x"}, c.args...)
		code, out, errOut := cliRun(t, args...)
		require.Equal(t, 1, code, "%v: %s", c.args, errOut)
		require.Empty(t, out)
		for _, w := range c.want {
			require.Contains(t, errOut, w, "%v", c.args)
		}
		require.NotContains(t, errOut, "127.0.0.1:1", "refused before dialing: %v", c.args)
	}
}

func TestHostZoneIsANamedZone(t *testing.T) {
	t.Setenv("TZ", "Asia/Tokyo")
	require.Equal(t, "Asia/Tokyo", hostZone())
	t.Setenv("TZ", ":America/Chicago")
	require.Equal(t, "America/Chicago", hostZone())
	t.Setenv("TZ", "Not/AZone")
	require.NotEqual(t, "Not/AZone", hostZone())
	require.NotEqual(t, "Local", hostZone())
}

func TestPrintSpec(t *testing.T) {
	target, err := readTarget("../testdata/sample/dispatch.json", nil)
	require.NoError(t, err)
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	spec, err := intent.Build(intent.Request{Name: "nightly", Target: target, Cron: "0 2 * * *", TimeZone: "Europe/Paris",
		Until: "task_completed", Owner: "ana"}, now)
	require.NoError(t, err)
	var b strings.Builder
	printSpec(&b, spec, now)
	require.Equal(t, `  fires    task T5 (Add user authentication with JWT.), cron 0 2 * * * in Europe/Paris
  next     2026-03-02 02:00:00 CET, 2026-03-03 02:00:00 CET, 2026-03-04 02:00:00 CET
  stops    once task_completed holds after a run, or after 10000 runs; in error after 3 failed fires in a row (backoff from 1m0s, at most 1h0m0s)
  catch-up at most 1 missed fire after downtime, the rest: skip (catch-up window 24h0m0s)
  owner    ana
`, b.String())
}
