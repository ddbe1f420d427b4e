package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/temporalconn"
)

// The dry run prints exactly the plan BuildPlan makes for the full dispatch
// (the golden reviewed against docs/contract.md §3).
func TestPlanPrintsTheGoldenPlan(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"plan", "../testdata/dispatch/full.json"}, nil, &out)
	require.NoError(t, err)
	want, err := os.ReadFile("../testdata/dispatch/full.plan.yaml")
	require.NoError(t, err)
	require.Equal(t, string(want), out.String())
}

func TestPlanReadsStdinAndHonoursAttempt(t *testing.T) {
	data, err := os.ReadFile("../testdata/sample/dispatch.json")
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-attempt", "2", "-"}, bytes.NewReader(data), &out))
	require.Contains(t, out.String(), "name: karvi-t5-020d01-r2")
	require.Contains(t, out.String(), `REDISPATCH: "1"`)
}

func TestPlanRejectsBadInputNamingTheField(t *testing.T) {
	cases := map[string]string{
		`{"taskId":"../x","message":"m"}`:                  "taskId",
		`{"taskId":"T1","message":""}`:                     "message",
		`{"taskId":"T1","message":"m","timeoutSec":"ten"}`: "timeoutSec",
		`{"taskId":"T1","message":"m","skill":"no-such"}`:  "skill",
		`not json`: "dispatch plan",
		`{"taskId":"T1","message":"m","timeoutSec":-5}`:      "timeoutSec",
		`{"taskId":"T1","message":"m","artifacts":[{}]}`:     "artifacts",
		`{"taskId":"T1","message":"m","mode":"sideways"}`:    "mode",
		`{"taskId":"T1","message":"m","requiredSkills":[1]}`: "requiredSkills",
	}
	for in, field := range cases {
		var out bytes.Buffer
		err := run(context.Background(), []string{"plan", "-"}, strings.NewReader(in), &out)
		require.Error(t, err, in)
		require.Contains(t, err.Error(), field, in)
		require.Empty(t, out.String(), "nothing printed for %s", in)
	}
}

// cliRun runs the starter as main would and returns its exit code and what
// it printed. The profile file is one that does not exist, so a developer's
// own stays out.
func cliRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = cli(ctx, args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelpIsShownOnceAndExitsZero(t *testing.T) {
	cases := map[string][]string{
		"starter:":              {"-h"},
		"starter: ":             {"--help"},
		"starter:  ":            {"help"},
		"Usage: starter status": {"status", "-h"},
		"Usage: starter abort":  {"help", "abort"},
		"Usage: starter resume": {"help", "resume"},
		"Usage: starter start":  {"-address", "x:1", "start", "--help", "file.json"},
	}
	for want, args := range cases {
		code, out, errOut := cliRun(t, args...)
		require.Equal(t, 0, code, "%v", args)
		require.Empty(t, errOut, "%v", args)
		require.Contains(t, out, strings.TrimSpace(want), "%v", args)
		require.Equal(t, 1, strings.Count(out, "Usage:"), "usage once for %v:\n%s", args, out)
	}
	_, out, _ := cliRun(t, "-h")
	for _, c := range commands {
		require.Contains(t, out, "starter "+c.name+" ", "every command is listed")
	}
	_, out, _ = cliRun(t, "redispatch", "-h")
	for _, f := range []string{"-follow", "-reason", "-address", "-namespace", "-task-queue"} {
		require.Contains(t, out, f)
	}
}

// A mistake on the command line: exit 2, the error and the usage once, on
// stderr, nothing on stdout.
func TestUsageErrorsExitTwoAndPrintUsageOnce(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"-address", "x:1"}, "no command given"},
		{[]string{"frobnicate", "x"}, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"status"}, "status takes exactly one argument, <taskId>; got 0"},
		{[]string{"status", "T1", "T2"}, "got 2"},
		{[]string{"status", "-follow", "T5"}, "-follow"},
		{[]string{"-bogus", "status", "T5"}, "-bogus"},
		{[]string{"plan", "-attempt", "two", "-"}, `invalid value "two" for flag -attempt`},
	}
	for _, c := range cases {
		code, out, errOut := cliRun(t, c.args...)
		require.Equal(t, 2, code, "%v", c.args)
		require.Empty(t, out, "%v", c.args)
		require.True(t, strings.HasPrefix(errOut, "starter: "), "%v: %s", c.args, errOut)
		require.Contains(t, errOut, c.want, "%v", c.args)
		require.Equal(t, 1, strings.Count(errOut, "Usage:"), "usage once for %v:\n%s", c.args, errOut)
		require.Equal(t, 1, strings.Count(errOut, c.want), "the error once for %v:\n%s", c.args, errOut)
	}
}

// Connection flags go before or after the command, and a command's flags
// before or after its argument; the last value given wins.
func TestFlagsBeforeOrAfterTheCommand(t *testing.T) {
	cases := []struct {
		args []string
		conn temporalconn.Flags
		opts any // the command's own flags
		arg  string
	}{
		{args: []string{"-address", "a:1", "status", "T5"}, conn: temporalconn.Flags{Address: "a:1"}, opts: &noFlags{}, arg: "T5"},
		{args: []string{"status", "-address", "a:1", "T5"}, conn: temporalconn.Flags{Address: "a:1"}, opts: &noFlags{}, arg: "T5"},
		{args: []string{"status", "T5", "-address", "a:1"}, conn: temporalconn.Flags{Address: "a:1"}, opts: &noFlags{}, arg: "T5"},
		{args: []string{"-address", "a:1", "-namespace", "ns", "brief", "-address", "b:2", "T5"},
			conn: temporalconn.Flags{Address: "b:2", Namespace: "ns"}, opts: &noFlags{}, arg: "T5"},
		{args: []string{"start", "-follow", "-address", "a:1", "-task-queue", "q", "d.json"},
			conn: temporalconn.Flags{Address: "a:1", TaskQueue: "q"},
			opts: &startOpts{followOpts: followOpts{follow: true}, budgetOpts: budgetOpts{action: "block"}}, arg: "d.json"},
		{args: []string{"-task-queue", "q", "start", "-"}, conn: temporalconn.Flags{TaskQueue: "q"},
			opts: &startOpts{budgetOpts: budgetOpts{action: "block"}}, arg: "-"},
		{args: []string{"abort", "-reason", "wrong branch", "T5"}, opts: &reasonOpts{reason: "wrong branch"}, arg: "T5"},
		{args: []string{"resume", "-reason", "limit raised", "T5"}, opts: &reasonOpts{reason: "limit raised"}, arg: "T5"},
		{args: []string{"redispatch", "T5", "-reason", "again", "-follow"},
			opts: &redispatchOpts{followOpts: followOpts{follow: true}, reasonOpts: reasonOpts{reason: "again"}}, arg: "T5"},
		{args: []string{"plan", "-attempt", "2", "-templates", "/t", "-"}, opts: &planOpts{attempt: 2, templatesOpts: templatesOpts{templates: "/t"}}, arg: "-"},
		{args: []string{"status", "--", "-odd"}, opts: &noFlags{}, arg: "-odd"},
	}
	t.Setenv("KARVI_EDDA_TEMPLATES", "")
	for _, c := range cases {
		inv, err := parseArgs(c.args)
		require.NoError(t, err, "%v", c.args)
		c.conn.DefaultTaskQueue = taskapi.DefaultTaskQueue
		require.Equal(t, c.conn, inv.conn, "%v", c.args)
		require.Equal(t, c.opts, inv.opts, "%v", c.args)
		require.Equal(t, c.arg, inv.arg, "%v", c.args)
	}
}

// The connection goes through temporalconn: its settings are read (a bad
// one stops the command before any dial) and the flag reaches the dial.
// plan needs no Temporal, so broken settings do not concern it.
func TestCommandsDialThroughTheHelper(t *testing.T) {
	t.Setenv("TEMPORAL_TLS", "maybe")
	code, _, errOut := cliRun(t, "status", "-address", "127.0.0.1:1", "T5")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `TEMPORAL_TLS="maybe"`)

	code, out, errOut := cliRun(t, "plan", "../testdata/sample/dispatch.json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "name: karvi-t5-020d01")

	t.Setenv("TEMPORAL_TLS", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code = cli(ctx, []string{"-address", "127.0.0.1:7", "status", "-address", addr, "T5"}, nil, &stdout, &stderr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), "connect to Temporal at "+addr)
}

// Every command's handler is in its row of the table: adding a command is
// one edit.
func TestEveryCommandHasItsHandler(t *testing.T) {
	for _, c := range commands {
		require.NotNil(t, c.declare, "command %q", c.name)
	}
}
