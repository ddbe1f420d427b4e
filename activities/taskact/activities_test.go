package taskact

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
)

func exampleDispatch(t *testing.T) mapping.DispatchPlan {
	t.Helper()
	data, err := os.ReadFile("../../testdata/examples/A/dispatch.json")
	require.NoError(t, err)
	d, err := mapping.ParseDispatchPlan(data)
	require.NoError(t, err)
	return d
}

func TestLayoutKeepsEverythingInsideTheRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "escape")))
	l, err := activities.NewLayout(root)
	require.NoError(t, err)

	d := exampleDispatch(t)
	cwd, err := l.TaskCwd(d)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(l.Root(), "tasks", "T5"), cwd)

	for _, wd := range []string{"../x", "/etc", outside, "escape", "escape/sub", "tasks/../../x"} {
		d.WorkingDir = wd
		_, err := l.TaskCwd(d)
		require.Error(t, err, "workingDir %q must be refused", wd)
		require.Contains(t, err.Error(), "outside the work root")
	}
	d.WorkingDir = "repos/app"
	cwd, err = l.TaskCwd(d)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(l.Root(), "repos", "app"), cwd)

	for _, bad := range []string{"../T5", "a/b", ""} {
		_, err := l.RunDir(bad, "karvi-t5")
		require.Error(t, err, "taskId %q", bad)
	}
	_, err = l.RunDir("T5", "../x")
	require.Error(t, err)
}

func TestPreparePlanWritesIdempotentPlanUnderRoot(t *testing.T) {
	root := t.TempDir()
	a := &Activities{Config: activities.Config{WorkRoot: root}}
	var env testsuite.WorkflowTestSuite
	aenv := env.NewTestActivityEnvironment()
	aenv.RegisterActivity(a)

	req := PrepareRequest{Dispatch: exampleDispatch(t), Attempt: 2}
	v, err := aenv.ExecuteActivity(a.PreparePlan, req)
	require.NoError(t, err)
	var info PlanInfo
	require.NoError(t, v.Get(&info))
	require.Equal(t, mapping.PlanName("T5", 2), info.Summary.Name)
	require.True(t, strings.HasPrefix(info.PlanPath, root), "plan under the root")
	first, err := os.ReadFile(info.PlanPath)
	require.NoError(t, err)
	plan, err := mapping.ParsePlan(first)
	require.NoError(t, err)
	for _, ph := range plan.Phases {
		require.Equal(t, "1", ph.Env["REDISPATCH"], "attempt 2 is a redispatch on phase %s", ph.ID)
	}
	require.Equal(t, filepath.Join(info.Cwd, ".edda", "conductor", info.Summary.Name, "events.jsonl"), info.EventsPath)

	// Same request, same file.
	_, err = aenv.ExecuteActivity(a.PreparePlan, req)
	require.NoError(t, err)
	again, err := os.ReadFile(info.PlanPath)
	require.NoError(t, err)
	require.Equal(t, first, again)

	// A bad dispatch is final, and writes nothing.
	bad := exampleDispatch(t)
	bad.TaskID = "../../etc"
	_, err = aenv.ExecuteActivity(a.PreparePlan, PrepareRequest{Dispatch: bad, Attempt: 1})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, activities.ErrInvalidDispatch, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Contains(t, err.Error(), "taskId")
}

func TestStartConductorMissingBinaryIsFinal(t *testing.T) {
	a := &Activities{Config: activities.Config{WorkRoot: t.TempDir(), Conductor: "no-such-edda-binary"}}
	var env testsuite.WorkflowTestSuite
	aenv := env.NewTestActivityEnvironment()
	aenv.RegisterActivity(a)
	_, err := aenv.ExecuteActivity(a.StartConductor, StartRequest{})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, ErrConductorStart, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Contains(t, err.Error(), "no-such-edda-binary")
}

// writePlan builds example A's plan into dir and returns its path.
func writePlan(t *testing.T, dir string) string {
	t.Helper()
	p, err := mapping.BuildPlan(exampleDispatch(t), 1, mapping.DefaultTemplate())
	require.NoError(t, err)
	data, err := mapping.MarshalPlan(p)
	require.NoError(t, err)
	path := filepath.Join(dir, "plan.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

func TestCollectExplainsRedactsAndCountsMalformed(t *testing.T) {
	a := &Activities{}
	explain := a.explainer(writePlan(t, t.TempDir()))
	lines := []tailer.Line{
		{Offset: 0, Data: []byte(`{"seq":0,"ts":"2026-02-28T03:00:00Z","type":"phase_failed","phase_id":"test","attempt":1,"duration_ms":5,"error":"exit 1: token=ghp_abcdefghijklmnopqrstuvwxyz0123456789"}`)},
		{Offset: 100, Data: []byte(`not json`)},
		{Offset: 200, TooLong: true, Length: 2 << 20},
		{Offset: 300, Data: []byte(`{"seq":1,"ts":"2026-02-28T03:00:01Z","type":"gate_entered","phase_id":"test"}`)},
	}
	var res TailResult
	collect(&res, lines, explain)
	require.Equal(t, 2, res.Malformed)
	require.Contains(t, res.MalformedSample, "2097152 bytes")
	require.Len(t, res.Events, 2, "unknown event types are kept")
	failed := res.Events[0]
	require.Equal(t, mapping.Position{Offset: 0}, failed.Pos)
	require.True(t, strings.HasPrefix(failed.Error, "cmd `cargo test` exited 1: "), failed.Error)
	require.NotContains(t, failed.Error, "ghp_abcdefghij", "secrets are masked before history")
	require.Contains(t, failed.Error, "***REDACTED***")
	require.Equal(t, "gate_entered", res.Events[1].Type)
}

func TestReadStateExplainsAndRedacts(t *testing.T) {
	dir := t.TempDir()
	a := &Activities{}
	explain := a.explainer(writePlan(t, dir))
	path := filepath.Join(dir, "state.json")

	_, why := readState(path, explain)
	require.Equal(t, "state.json missing", why)

	require.NoError(t, os.WriteFile(path, []byte(`{"plan_status": "running", "phases": [`), 0o644))
	_, why = readState(path, explain)
	require.Contains(t, why, "state.json unreadable")

	require.NoError(t, os.WriteFile(path, []byte(`{"plan_name":"karvi-t5","plan_status":"running","phases":[
	  {"id":"implement","status":"passed","attempts":1},
	  {"id":"test","status":"failed","attempts":3,"error":{"error_type":"check_failed","message":"exit 1: password=hunter2hunter2","retryable":false,"timestamp":"t","check_index":0}}]}`), 0o644))
	cs, why := readState(path, explain)
	require.Empty(t, why)
	msg := cs.Phases[1].Error.Message
	require.True(t, strings.HasPrefix(msg, "cmd `cargo test` exited 1: "), msg)
	require.NotContains(t, msg, "hunter2")
}

func TestConductorEnvDropsSecrets(t *testing.T) {
	t.Setenv("KARVI_API_TOKEN", "tok-123")
	t.Setenv("KARVI_TEMPORAL_CODEC_KEY", "key-456")
	env := conductorEnv([]string{"EXTRA=1"})
	joined := strings.Join(env, "\n")
	require.NotContains(t, joined, "tok-123")
	require.NotContains(t, joined, "key-456")
	require.Contains(t, env, "EXTRA=1")
	require.NotEmpty(t, os.Getenv("PATH"))
	require.Contains(t, joined, "PATH=")
}

// Every secret the worker reads from its environment (the SDK's envconfig
// variables, the codec keys, karvi's tokens) stays out of the conductor's,
// and so out of every agent's; what an agent needs stays in.
func TestConductorEnvHoldsNoWorkerSecret(t *testing.T) {
	secrets := map[string]string{
		"TEMPORAL_API_KEY":                 "s-api-key",
		"TEMPORAL_TLS_CLIENT_KEY_DATA":     "s-client-key",
		"TEMPORAL_TLS_CLIENT_CERT_DATA":    "s-client-cert",
		"TEMPORAL_TLS_CLIENT_KEY_PATH":     "s-client-key-path",
		"TEMPORAL_TLS_SERVER_CA_CERT_DATA": "s-ca",
		"TEMPORAL_CODEC_AUTH":              "s-codec-auth",
		"TEMPORAL_GRPC_META_AUTHORIZATION": "s-grpc-meta",
		"TEMPORAL_CONFIG_FILE":             "s-config-file",
		"TEMPORAL_PROFILE":                 "s-profile",
		"TEMPORAL_ADDRESS":                 "s-address",
		"KARVI_API_TOKEN":                  "s-karvi-token",
		"KARVI_API_TOKEN_ADMIN":            "s-karvi-admin",
		"KARVI_TEMPORAL_CODEC_KEY":         "s-codec-key",
		"KARVI_TEMPORAL_CODEC_OLD_KEYS":    "s-old-keys",
		"KARVI_EDDA_RUN_TOKEN":             "s-run-token",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("ANTHROPIC_API_KEY", "agent-key")
	t.Setenv("HOME", "/home/agent")
	env := conductorEnv([]string{"EXTRA=1"})
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		_, secret := secrets[name]
		require.False(t, secret, "%s reaches the conductor", name)
		for s := range maps.Values(secrets) {
			require.NotContains(t, value, s, "%s carries a secret", name)
		}
	}
	require.Contains(t, env, "ANTHROPIC_API_KEY=agent-key", "the agent's own key stays")
	require.Contains(t, env, "HOME=/home/agent")
	require.Contains(t, env, "PATH="+os.Getenv("PATH"))
	require.Contains(t, env, "EXTRA=1")
}

func TestSinkErrorsMapOntoRetryPolicy(t *testing.T) {
	cases := []struct {
		kind      karvi.Kind
		wantType  string // "" = a plain, retryable error
		retryable bool
	}{
		{karvi.KindNoBrief, ErrNoBrief, false},
		{karvi.KindIllegalTransition, ErrSinkRejected, false},
		{karvi.KindUnauthorized, ErrSinkRejected, false},
		{karvi.KindBadRequest, ErrSinkRejected, false},
		{karvi.KindTransient, "", true},
	}
	for _, c := range cases {
		err := sinkError("patch brief of task T5", &karvi.Error{Op: "PATCH", Kind: c.kind, Message: "karvi says no"})
		var appErr *temporal.ApplicationError
		if c.wantType == "" {
			require.False(t, errors.As(err, &appErr), "%s: transient errors stay plain so Temporal retries them", c.kind)
			continue
		}
		require.True(t, errors.As(err, &appErr), "%s", c.kind)
		require.Equal(t, c.wantType, appErr.Type(), "%s", c.kind)
		require.Equal(t, !c.retryable, appErr.NonRetryable(), "%s", c.kind)
		require.Contains(t, err.Error(), "karvi says no", "karvi's own message is kept")
	}
	// File-system errors of the file sink are retried.
	err := sinkError("patch", os.ErrPermission)
	var appErr *temporal.ApplicationError
	require.False(t, errors.As(err, &appErr))
}
