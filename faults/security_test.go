//go:build realserver

package faults

// Security: secrets planted in conductor output never reach the
// brief, Temporal history or the logs; the payload codec leaves no
// plaintext in history; the karvi token reaches neither history, logs nor
// the conductor; work directories and task ids cannot leave the work root.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/codec"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// secretBook makes unique, deterministic secrets and remembers every one,
// so a scan can look for each of them (and for a piece of each, since a
// secret cut in half and half shown is still a leak).
type secretBook struct {
	rnd     *rand.Rand
	secrets map[string]string // value -> label
}

func newSecretBook(seed uint64) *secretBook {
	return &secretBook{rnd: rand.New(rand.NewPCG(seed, seed^0x5eed)), secrets: map[string]string{}}
}

const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upperD  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	lower   = "abcdefghijklmnopqrstuvwxyz"
	hexDig  = "0123456789abcdef"
	b64     = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b64url  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	mixedD  = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
	keyVals = 14
)

func (b *secretBook) rand(alphabet string, n int) string {
	out := make([]byte, n)
	for i := range out {
		out[i] = alphabet[b.rnd.IntN(len(alphabet))]
	}
	return string(out)
}

func (b *secretBook) note(label, value string) string {
	b.secrets[value] = label
	return value
}

// sensitiveKeys are the key names whose values the redaction rules mask
// (mapping/redact), plus names that contain one of them as a word, as
// configuration really spells them.
var sensitiveKeys = []string{"api_key", "token", "secret", "password", "authorization",
	"credential", "private_key", "access_key", "secret_key", "conn_string", "passwd",
	"OPENAI_API_KEY", "db_password", "github_token"}

// keyForms writes every sensitive key with a fresh value, in the JSON,
// key=value, key: value and header forms (rotated by variant). The values
// are lowercase words: no value pattern would catch them, only the key.
func (b *secretBook) keyForms(variant int) string {
	var parts []string
	for i, k := range sensitiveKeys {
		v := b.note("key "+k, b.rand(lower, keyVals))
		switch (i + variant) % 4 {
		case 0:
			parts = append(parts, k+"="+v)
		case 1:
			parts = append(parts, fmt.Sprintf(`{"%s": "%s"}`, k, v))
		case 2:
			parts = append(parts, k+": "+v)
		case 3:
			parts = append(parts, fmt.Sprintf(`"%s":"%s"`, k, v))
		}
	}
	return strings.Join(parts, "; ")
}

// valuePatterns writes one fresh secret of every value pattern.
func (b *secretBook) valuePatterns() string {
	pem := func(kind string) string {
		l1 := b.note("PEM "+kind+" body", b.rand(b64, 64))
		l2 := b.note("PEM "+kind+" body", b.rand(b64, 64))
		return fmt.Sprintf("-----BEGIN %s PRIVATE KEY-----\n%s\n%s\n-----END %s PRIVATE KEY-----", kind, l1, l2, kind)
	}
	parts := []string{
		"openai " + b.note("sk-", "sk-proj-"+b.rand(alnum, 40)),
		"anthropic " + b.note("sk-ant-", "sk-ant-api03-"+b.rand(b64url, 60)),
		"aws " + b.note("AKIA", "AKIA"+b.rand(upperD, 16)),
		"gcp " + b.note("AIza", "AIza"+b.rand(b64url, 35)),
		"github " + b.note("ghp_", "ghp_"+b.rand(alnum, 36)),
		b.note("gho_", "gho_"+b.rand(alnum, 36)),
		b.note("ghu_", "ghu_"+b.rand(alnum, 36)),
		"Authorization: Bearer " + b.note("Bearer", b.rand(mixedD, 32)),
		pem("RSA"), pem("EC"), pem("OPENSSH"),
		"sha " + b.note("hex40+", b.rand(hexDig, 64)),
		"blob " + b.note("base64 40+", b.rand(b64, 48)),
	}
	return strings.Join(parts, " ")
}

// nested10 is a JSON text with a secret under a sensitive key and another
// under a plain key at depth 10.
func (b *secretBook) nested10() string {
	inner := fmt.Sprintf(`{"password":"%s","note":"%s"}`,
		b.note("depth-10 password", b.rand(lower, keyVals)),
		b.note("depth-10 ghp_", "ghp_"+b.rand(alnum, 36)))
	for i := 9; i >= 1; i-- {
		inner = fmt.Sprintf(`{"l%d":%s}`, i, inner)
	}
	return inner
}

// scan fails the test for every secret, or 16-byte piece of one (its
// start or end), found in data.
func (b *secretBook) scan(t *testing.T, what string, data []byte) {
	t.Helper()
	require.NotEmpty(t, data, "%s: nothing to scan", what)
	// Case-insensitive: a secret lowercased on the way (an error_type is
	// normalised) is still a leak.
	folded := bytes.ToLower(data)
	var found []string
	for v, label := range b.secrets {
		pieces := []string{v}
		if len(v) >= 24 {
			pieces = append(pieces, v[:16], v[len(v)-16:])
		}
		for _, p := range pieces {
			if bytes.Contains(folded, bytes.ToLower([]byte(p))) {
				found = append(found, fmt.Sprintf("%s (%q of %q)", label, p, v))
				break
			}
		}
	}
	require.Empty(t, found, "%s leaks %d secrets", what, len(found))
}

// workflowShow is `temporal workflow show --output json` for a task, the
// way an operator reads history.
func workflowShow(t *testing.T, r *rig, workflowID string, extra ...string) []byte {
	t.Helper()
	cli, err := devenv.Binary("temporal")
	require.NoError(t, err)
	args := append([]string{"workflow", "show", "--address", r.Server.Addr, "--namespace", r.Server.Namespace,
		"--workflow-id", workflowID, "--output", "json"}, extra...)
	out, err := exec.Command(cli, args...).CombinedOutput()
	require.NoError(t, err, "temporal workflow show: %s", out)
	return out
}

// showPayloads is the output of workflow show with every base64 payload
// decoded and appended: the CLI prints payload data as base64, where a
// plaintext scan would see nothing.
func showPayloads(t *testing.T, out []byte) []byte {
	t.Helper()
	var doc any
	require.NoError(t, json.Unmarshal(out, &doc), "workflow show output is JSON")
	all := append([]byte(nil), out...)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				if s, ok := val.(string); ok && (k == "data" || k == "encoding" || k == "type" || k == "encryption-key-id") {
					if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
						all = append(append(all, '\n'), dec...)
					}
				}
				walk(val)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	return all
}

// historyBytes is the task's history as the server stores it (protobuf):
// payload data appears in it byte for byte.
func historyBytes(t *testing.T, r *rig, taskID string) []byte {
	t.Helper()
	data, err := proto.Marshal(r.History(taskID))
	require.NoError(t, err)
	return data
}

func readAll(t *testing.T, paths ...string) []byte {
	t.Helper()
	var out []byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		out = append(out, data...)
	}
	return out
}

func TestRedactionEndToEnd(t *testing.T) {
	t.Parallel()
	book := newSecretBook(3)
	fake := newFakeEdda(t)
	r := newRig(t, fake.options(testrig.Options{}))

	// R1: a run whose events and state.json carry secrets everywhere
	// conductor text goes; it ends blocked with no terminal event.
	// ParseEvent cuts text at mapping.MaxTextBytes, marking the cut with
	// "…(truncated)" (14 bytes); the filler puts the cut 20 characters into
	// this secret.
	filler := strings.Repeat("y", mapping.MaxTextBytes-14-20-1-len("check failed: "))
	cutSecret := book.note("hex cut by the 4 KiB text limit", book.rand(hexDig, 64))
	ghpTS := book.note("ghp_ in ts", "ghp_"+book.rand(alnum, 36))
	hexType := book.note("hex in type", book.rand(hexDig, 40))
	skPhase := book.note("sk-ant- in phase_id", "sk-ant-api03-"+book.rand(b64url, 40))
	akiaPlan := book.note("AKIA in plan_name", "AKIA"+book.rand(upperD, 16))
	akiaErrType := book.note("AKIA in error_type", "AKIA"+book.rand(upperD, 16))
	escSK := "sk-ant-api03-" + book.rand(b64url, 40)
	book.note("JSON-escaped sk-ant-", escSK)
	escPW := book.rand(lower, keyVals)
	book.note("JSON-escaped password key", escPW)
	malPW := book.rand(lower, keyVals)
	book.note("password in a malformed line", malPW)
	malGH := book.note("ghp_ in a malformed line", "ghp_"+book.rand(alnum, 36))

	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	lines := []string{
		fmt.Sprintf(`{"seq":0,"ts":"%s","type":"plan_start","plan_name":%s,"phase_count":3}`, ts(0), js(akiaPlan)),
		fmt.Sprintf(`{"seq":1,"ts":"%s","type":"phase_start","phase_id":"implement","attempt":1}`, ts(1)),
		fmt.Sprintf(`{"seq":2,"ts":"%s","type":"phase_failed","phase_id":"implement","attempt":1,"error_type":"agent_crash","error":%s}`,
			ts(2), js("agent crashed: "+book.keyForms(0)+" "+book.valuePatterns())),
		fmt.Sprintf(`{"seq":3,"ts":%s,"type":"phase_start","phase_id":"implement","attempt":2}`, js(ghpTS)),
		fmt.Sprintf(`{"seq":4,"ts":"%s","type":"phase_passed","phase_id":"implement","attempt":2,"duration_ms":10,"cost_usd":0.1}`, ts(3)),
		fmt.Sprintf(`{"seq":5,"ts":"%s","type":"tool_call","phase_id":"implement","error":%s,"reason":%s,"error_type":%s,`+
			`"args":%s,"headers":{"Authorization":"Bearer %s"}}`,
			ts(4), js(book.keyForms(1)), js(book.valuePatterns()), js(akiaErrType), book.nested10(),
			book.note("Bearer in an unknown field", book.rand(mixedD, 32))),
		fmt.Sprintf(`{"seq":6,"ts":"%s","type":%s,"phase_id":"implement"}`, ts(5), js(hexType)),
		fmt.Sprintf(`{"seq":7,"ts":"%s","type":"phase_failed","phase_id":%s,"attempt":1,"error":"x"}`, ts(6), js(skPhase)),
		fmt.Sprintf(`{"seq":"x","type":"phase_start","password":"%s","note":"%s"}`, malPW, malGH),
		fmt.Sprintf(`{"seq":8,"ts":"%s","type":"phase_start","phase_id":"test","attempt":1}`, ts(7)),
		fmt.Sprintf(`{"seq":9,"ts":"%s","type":"phase_failed","phase_id":"test","attempt":1,"error_type":"check_failed","error":%s}`,
			ts(8), js("check failed: nested "+book.nested10())),
		fmt.Sprintf(`{"seq":10,"ts":"%s","type":"phase_failed","phase_id":"test","attempt":2,"error_type":"check_failed","error":%s}`,
			ts(9), js("check failed: "+filler+" "+cutSecret)),
		// Escapes: the raw line holds neither "sk-ant-" nor "password".
		fmt.Sprintf(`{"seq":11,"ts":"%s","type":"phase_failed","phase_id":"test","attempt":3,"error_type":"check_failed","error":"\u0073%s p\u0061ssword=%s"}`,
			ts(10), escSK[1:], escPW),
		fmt.Sprintf(`{"seq":12,"ts":"%s","type":"phase_skipped","phase_id":"docs","reason":%s}`,
			ts(11), js("skipped: "+book.keyForms(2)+" "+book.valuePatterns())),
	}
	state := map[string]any{
		"plan_name": "x", "plan_status": "blocked", "total_cost_usd": 0.1,
		"phases": []any{
			map[string]any{"id": "implement", "status": "passed", "attempts": 2},
			map[string]any{"id": "test", "status": "failed", "attempts": 3, "error": map[string]any{
				"error_type": "check_failed", "message": book.keyForms(3) + " " + book.valuePatterns() + " " + book.nested10(),
				"retryable": true}},
			map[string]any{"id": "docs", "status": "skipped", "skip_reason": book.keyForms(0) + " " + book.valuePatterns()},
		},
	}
	fake.script(t, "RD1", fakeRun{chunks: [][]byte{[]byte(strings.Join(lines, "\n") + "\n")}, state: testrig.MustJSON(t, state)})

	// R2: a conductor that dies (exit 1, no state.json) after printing
	// secrets; the last of its output becomes part of lastError. The
	// 2 KiB tail window starts 19 bytes before the end of a hex secret.
	tailCut := book.note("hex cut by the log tail window", book.rand(hexDig, 64))
	l1 := "error: " + book.keyForms(1)
	l2 := "fatal: " + book.keyForms(2)
	pad := 2048 - 20 - len(l1) - len(l2) - 2
	require.Positive(t, pad)
	l2 += " " + strings.Repeat(".", pad-1)
	stdout := book.valuePatterns() + "\nconductor output " + tailCut + "\n" + l1 + "\n" + l2 + "\n"
	fake.script(t, "RD2", fakeRun{chunks: [][]byte{[]byte(strings.Join(lines[:2], "\n") + "\n")},
		stdout: []byte(stdout), exit: 1})

	control := "CONTROL-" + book.rand(upperD, 12)
	run1 := r.Start(testrig.Dispatch(t, "RD1", "Redaction run one. "+control))
	run2 := r.Start(testrig.Dispatch(t, "RD2", "Redaction run two. "+control))
	res1, res2 := r.Result(run1), r.Result(run2)

	require.EqualValues(t, "blocked", res1.Outcome.TaskStatus)
	require.True(t, strings.HasPrefix(res1.Outcome.LastError, "Phase test failed after 3 attempts: check failed: "), res1.Outcome.LastError)
	require.Contains(t, res1.Outcome.LastError, "***REDACTED***")
	require.EqualValues(t, "blocked", res2.Outcome.TaskStatus)
	require.Contains(t, res2.Outcome.LastError, "last output: ")
	require.Contains(t, res2.Outcome.LastError, "***REDACTED***")
	t.Logf("RD2 lastError: %s", res2.Outcome.LastError)

	st1, err := r.Status("RD1")
	require.NoError(t, err)
	require.Equal(t, 1, st1.Malformed)
	require.Equal(t, len(lines)-1, st1.EventsApplied, "every valid line was read")
	st2, err := r.Status("RD2")
	require.NoError(t, err)
	brief := readAll(t, filepath.Join(r.SinkDir, "RD1", "brief.json"))
	require.Contains(t, string(brief), "***REDACTED***", "the secrets reached the brief, masked")

	for _, task := range []string{"RD1", "RD2"} {
		for _, f := range []string{"brief.json", "patches.jsonl", "status.json"} {
			book.scan(t, task+" sink "+f, readAll(t, filepath.Join(r.SinkDir, task, f)))
		}
		show := showPayloads(t, workflowShow(t, r, taskapi.WorkflowID(task)))
		hist := historyBytes(t, r, task)
		// Controls: the scans see payload content, so they could see a leak.
		require.True(t, bytes.Contains(show, []byte(control)), "decoded workflow show holds the dispatch message")
		require.True(t, bytes.Contains(hist, []byte(control)), "stored history holds the dispatch message")
		book.scan(t, task+" temporal workflow show", show)
		book.scan(t, task+" history", hist)
	}
	book.scan(t, "RD1 result", testrig.MustJSON(t, res1))
	book.scan(t, "RD2 result", testrig.MustJSON(t, res2))
	book.scan(t, "RD1 status query", testrig.MustJSON(t, st1))
	book.scan(t, "RD2 status query", testrig.MustJSON(t, st2))
	book.scan(t, "worker log", readAll(t, r.WorkerLogs()...))
	t.Logf("%d distinct secrets planted, none found in sink, history, queries or logs", len(book.secrets))
}

// snapshotTree records every path under root with its type and size, minus
// the subtrees in skip: what a test compares to prove nothing was written.
func snapshotTree(t *testing.T, root string, skip ...string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, s := range skip {
			if p == s || strings.HasPrefix(p, s+string(filepath.Separator)) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		if info.Mode().IsRegular() {
			desc += " " + strconv.FormatInt(info.Size(), 10)
		}
		snap[p] = desc
		return nil
	})
	require.NoError(t, err)
	return snap
}

// findAppError walks a failure's chain of application errors to the one
// of the given type.
func findAppError(err error, typ string) *temporal.ApplicationError {
	for err != nil {
		var app *temporal.ApplicationError
		if !errors.As(err, &app) {
			return nil
		}
		if app.Type() == typ {
			return app
		}
		err = app.Unwrap()
	}
	return nil
}

// invalidDispatchError asserts that a workflow failed on a non-retryable
// invalid dispatch and returns the whole failure text.
func invalidDispatchError(t *testing.T, err error) string {
	t.Helper()
	require.Error(t, err)
	app := findAppError(err, activities.ErrInvalidDispatch)
	require.NotNil(t, app, "no %s failure in %v", activities.ErrInvalidDispatch, err)
	require.True(t, app.NonRetryable(), "an invalid dispatch is not retried: %v", err)
	return err.Error()
}

// Identifiers in state.json (phase ids, plan_status, error_type) come from
// the conductor too; they reach lastError when state.json explains the end.
func TestRedactionStateIdentifiers(t *testing.T) {
	t.Parallel()
	book := newSecretBook(4)
	fake := newFakeEdda(t)
	r := newRig(t, fake.options(testrig.Options{}))
	start := fmt.Sprintf(`{"seq":0,"ts":"%s","type":"plan_start","plan_name":"x","phase_count":3}`+"\n", ts(0))

	// SI1: the failed phase's id and error type are secrets.
	state1 := map[string]any{"plan_name": "x", "plan_status": "blocked", "phases": []any{
		map[string]any{"id": book.note("sk-ant- as phase id", "sk-ant-api03-"+book.rand(b64url, 40)), "status": "failed", "attempts": 1,
			"error": map[string]any{"error_type": book.note("AKIA as error_type", "AKIA"+book.rand(upperD, 16)), "message": "boom"}},
	}}
	fake.script(t, "SI1", fakeRun{chunks: [][]byte{[]byte(start)}, state: testrig.MustJSON(t, state1)})
	// SI2: plan_status is a secret, so the outcome names it.
	state2 := map[string]any{"plan_name": "x", "plan_status": book.note("ghp_ as plan_status", "ghp_"+book.rand(alnum, 36)), "phases": []any{}}
	fake.script(t, "SI2", fakeRun{chunks: [][]byte{[]byte(start)}, state: testrig.MustJSON(t, state2)})

	control := "CONTROL-" + book.rand(upperD, 12)
	for _, task := range []string{"SI1", "SI2"} {
		res := r.Result(r.Start(testrig.Dispatch(t, task, "Identifiers. "+control)))
		require.EqualValues(t, "blocked", res.Outcome.TaskStatus)
		t.Logf("%s lastError: %s", task, res.Outcome.LastError)
		book.scan(t, task+" result", testrig.MustJSON(t, res))
		book.scan(t, task+" sink status.json", readAll(t, filepath.Join(r.SinkDir, task, "status.json")))
		show := showPayloads(t, workflowShow(t, r, taskapi.WorkflowID(task)))
		require.True(t, bytes.Contains(show, []byte(control)))
		book.scan(t, task+" temporal workflow show", show)
	}
	book.scan(t, "worker log", readAll(t, r.WorkerLogs()...))
}

// requireEnvFree reads the environment of every running process of the
// conductor's group and fails if any holds one of the secrets or names.
func requireEnvFree(t *testing.T, pgid int, forbidden ...string) {
	t.Helper()
	pids := testrig.GroupProcesses(t, pgid)
	require.GreaterOrEqual(t, len(pids), 2, "the supervisor and the conductor run")
	for _, pid := range pids {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		require.NoError(t, err)
		require.Contains(t, string(env), "PATH=", "environ of %d was readable", pid)
		for _, f := range forbidden {
			require.NotContains(t, string(env), f, "process %d of the conductor's group", pid)
		}
	}
}

// The karvi token (KARVI_API_TOKEN in the worker's environment) is used for
// karvi and nowhere else: not in workflow input or history, not in the
// worker's log, not in the conductor's (or its agents') environment.
func TestKarviTokenNeverLeaks(t *testing.T) {
	t.Parallel()
	book := newSecretBook(5)
	// Lowercase letters only: no redaction rule would hide this token, so
	// only its absence can pass the scans.
	token := book.note("karvi token", "kt"+book.rand(lower, 30))
	r := newRig(t, testrig.Options{Sink: "karvi", KarviToken: token, Scenario: "checks=pass"})
	run := r.Start(testrig.Dispatch(t, "TK1", "Token task. "+testrig.ExampleCosts+" [sim phase=docs hang=forever]"))
	s := r.WaitPhase("TK1", "docs")
	h := conductorHandle(t, r, "TK1", s.PlanName)
	requireEnvFree(t, h.PGID, token, "KARVI_API_TOKEN")

	require.NoError(t, r.Signal("TK1", taskapi.SignalAbort, taskapi.AbortSignal{Reason: "token test"}))
	res := r.Result(run)
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	// Control: the worker did authenticate to karvi with the token.
	require.Equal(t, "blocked", r.KarviStatus("TK1"))
	require.NotEmpty(t, r.KarviPatches("TK1"))

	book.scan(t, "history", historyBytes(t, r, "TK1"))
	book.scan(t, "temporal workflow show", showPayloads(t, workflowShow(t, r, taskapi.WorkflowID("TK1"))))
	book.scan(t, "worker log", readAll(t, r.WorkerLogs()...))
	stateDir := filepath.Join(r.TaskDir("TK1"), ".edda", "conductor", s.PlanName)
	envFiles, err := filepath.Glob(filepath.Join(stateDir, "phase-env-*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, envFiles)
	runFiles, err := filepath.Glob(filepath.Join(r.WorkRoot, "runs", "TK1", s.PlanName, "*"))
	require.NoError(t, err)
	for _, p := range append(append(envFiles, runFiles...), filepath.Join(stateDir, "events.jsonl"), filepath.Join(stateDir, "state.json")) {
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Size() > 0 {
			book.scan(t, p, readAll(t, p))
		}
	}
	assertNoConductorGroups(t, r)
}

// Work directories and task ids cannot leave the work root: each attempt
// is refused with a clear, non-retryable error naming the field, before
// anything is created, and nothing outside the root changes. A workingDir
// inside the root still works.
func TestWorkRootEscapes(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep.txt"), []byte("untouched"), 0o644))
	r := newRig(t, testrig.Options{Scenario: "checks=pass"})
	tasks := filepath.Join(r.WorkRoot, "tasks")
	require.NoError(t, os.MkdirAll(tasks, 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(tasks, "link")))
	require.NoError(t, os.Symlink("../../..", filepath.Join(tasks, "up")))

	top := filepath.Dir(r.Dir)
	skip := []string{r.WorkRoot, r.SinkDir, filepath.Join(r.Dir, "worker-1.log")}
	before := snapshotTree(t, top, skip...)
	etcBefore, err := os.ReadDir("/etc")
	require.NoError(t, err)

	workingDirs := map[string]string{
		"WE1": "../../etc",
		"WE2": "..",
		"WE3": outside,
		"WE4": "/etc",
		"WE5": "tasks/link",
		"WE6": "tasks/link/sub/deeper",
		"WE7": "tasks/../../x",
		"WE8": "tasks/up",
		"WE9": "tasks/up/escaped",
	}
	for task, wd := range workingDirs {
		d := testrig.Dispatch(t, task, "Escape attempt.")
		d.WorkingDir = wd
		_, err := r.ResultErr(r.StartInput(taskapi.TaskInput{Dispatch: d}))
		msg := invalidDispatchError(t, err)
		require.Contains(t, msg, fmt.Sprintf("workingDir %q is outside the work root", wd), "%s", task)
	}
	for i, id := range []string{"../x", "a/b", "..", ".", "/etc/passwd", "x/../../y", "T\x00", "%2e%2e"} {
		d := testrig.Dispatch(t, "X", "Escape attempt.")
		d.TaskID = id
		run, err := r.Client.ExecuteWorkflow(context.Background(), startOptions(r, fmt.Sprintf("faults-escape-id-%d", i)),
			taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: d})
		require.NoError(t, err)
		r.Track(run.GetID())
		_, err = r.ResultErr(run)
		msg := invalidDispatchError(t, err)
		require.Contains(t, msg, "taskId", "taskId %q", id)
	}

	// Control: a workingDir inside the root is used as the conductor's cwd.
	d := testrig.Dispatch(t, "WOK", "Inside the root. [sim phase=docs delay=1ms]")
	d.WorkingDir = "projects/wok"
	res := r.Result(r.Start(d))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	_, err = os.Stat(filepath.Join(r.WorkRoot, "projects", "wok", ".edda", "conductor", res.PlanName, "events.jsonl"))
	require.NoError(t, err, "the conductor ran in the workingDir")

	require.Equal(t, before, snapshotTree(t, top, skip...), "files outside the work root changed")
	etcAfter, err := os.ReadDir("/etc")
	require.NoError(t, err)
	require.Equal(t, len(etcBefore), len(etcAfter), "/etc gained or lost entries")
	_, err = os.Stat("/etc/.edda")
	require.ErrorIs(t, err, fs.ErrNotExist)
	hs, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.Len(t, hs, 1, "only the control ran a conductor")
	entries, err := os.ReadDir(r.SinkDir)
	require.NoError(t, err)
	for _, e := range entries {
		require.Equal(t, "WOK", e.Name(), "a refused task reached the sink")
	}
	assertNoConductorGroups(t, r)
}

func startOptions(r *rig, id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: r.Queue}
}

// payloadsIn collects every Payload message inside m (inputs, results,
// markers, signals, search attributes...).
func payloadsIn(m proto.Message) []*commonpb.Payload {
	var out []*commonpb.Payload
	var walk func(protoreflect.Message)
	walk = func(msg protoreflect.Message) {
		if p, ok := msg.Interface().(*commonpb.Payload); ok {
			out = append(out, p)
			return
		}
		msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsMap():
				if fd.MapValue().Message() != nil {
					v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
						walk(mv.Message())
						return true
					})
				}
			case fd.IsList():
				if fd.Message() != nil {
					for i := 0; i < v.List().Len(); i++ {
						walk(v.List().Get(i).Message())
					}
				}
			case fd.Message() != nil:
				walk(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
	return out
}

// With KARVI_TEMPORAL_CODEC_KEY set, history holds no plaintext: a client
// and the CLI without the key see none of the dispatch; with the key (the
// codec DataConverter, or the worker's -codec-addr endpoint that the CLI
// and the Web UI use) it all decodes. The key reaches no conductor.
func TestPayloadCodec(t *testing.T) {
	t.Parallel()
	book := newSecretBook(6)
	keyHex := book.note("codec key", book.rand(hexDig, 64))
	key, err := codec.ParseKey(keyHex)
	require.NoError(t, err)
	keys, err := codec.NewKeys(key)
	require.NoError(t, err)
	port, err := devenv.FreePort()
	require.NoError(t, err)
	codecAddr := fmt.Sprintf("127.0.0.1:%d", port)
	r := newRig(t, testrig.Options{Scenario: "checks=pass", Env: []string{codec.EnvKey + "=" + keyHex},
		WorkerArgs: []string{"-codec-addr", codecAddr}})
	ccl, err := client.Dial(client.Options{HostPort: r.Server.Addr, Namespace: r.Server.Namespace, DataConverter: codec.DataConverter(keys),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	require.NoError(t, err)
	defer ccl.Close()

	marker := "CODEC-MARKER-" + book.rand(upperD, 16)
	d := testrig.Dispatch(t, "CD1", "Encrypted task "+marker+" [sim phase=docs hang=forever]")
	ctx := context.Background()
	run, err := ccl.ExecuteWorkflow(ctx, startOptions(r, taskapi.WorkflowID("CD1")), taskapi.TaskWorkflowName,
		taskapi.TaskInput{Dispatch: d})
	require.NoError(t, err)
	r.Track(run.GetID())

	// Only a client with the key can read the status query's answer.
	s := keyedStatus(t, ccl, run.GetID(), "phase docs to run", func(s taskapi.Status) bool {
		return s.CurrentPhase == "docs" && s.ConductorPID != 0
	})
	_, err = r.Status("CD1")
	require.Error(t, err, "a client without the key cannot decode the status")
	h := conductorHandle(t, r, "CD1", s.PlanName)
	requireEnvFree(t, h.PGID, keyHex, codec.EnvKey)

	require.NoError(t, ccl.SignalWorkflow(ctx, run.GetID(), "", taskapi.SignalAbort, taskapi.AbortSignal{Reason: marker}))
	var res taskapi.Result
	require.NoError(t, run.Get(ctx, &res), "the result decodes with the key")
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	require.Contains(t, res.Dispatch.Message, marker)

	// The history as any client without the key reads it.
	hist := r.History("CD1")
	raw, err := proto.Marshal(hist)
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(marker)), "plaintext in history")
	ps := payloadsIn(hist)
	encrypted := 0
	for _, p := range ps {
		if string(p.GetMetadata()["encoding"]) == codec.MetadataEncodingEncrypted {
			encrypted++
			continue
		}
		// Search attributes stay plain (the server indexes them); they
		// carry a "type" and hold task id, plan name, phase and status, and
		// the SDK's TemporalChangeVersion (a KeywordList of change ids).
		require.Contains(t, []string{"Keyword", "KeywordList"}, string(p.GetMetadata()["type"]),
			"an unencrypted payload that is not a search attribute: %s", p)
	}
	start := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetInput()
	require.NotEmpty(t, start.GetPayloads())
	for _, p := range start.GetPayloads() {
		require.Equal(t, codec.MetadataEncodingEncrypted, string(p.GetMetadata()["encoding"]), "workflow input")
	}
	// Control: decoded with the key, the same history holds the marker.
	dec, err := codec.NewCodec(keys).Decode(ps)
	require.NoError(t, err)
	found := false
	for _, p := range dec {
		found = found || bytes.Contains(p.GetData(), []byte(marker))
	}
	require.True(t, found, "the decoded history holds the dispatch")
	t.Logf("history: %d payloads, %d encrypted (the rest are search attributes)", len(ps), encrypted)

	// The CLI without the key sees no marker; with the worker's codec
	// endpoint it decodes.
	plain := showPayloads(t, workflowShow(t, r, run.GetID()))
	require.False(t, bytes.Contains(plain, []byte(marker)), "plaintext in temporal workflow show")
	viaCodec := showPayloads(t, workflowShow(t, r, run.GetID(), "--codec-endpoint", "http://"+codecAddr))
	require.True(t, bytes.Contains(viaCodec, []byte(marker)), "workflow show through the codec endpoint decodes")

	// The endpoint's own protocol: POST /decode with Payloads as JSON.
	body, err := protojson.Marshal(start)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "http://"+codecAddr+"/decode", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", r.Server.Namespace)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", answer)
	var decoded commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(answer, &decoded))
	require.Len(t, decoded.GetPayloads(), 1)
	require.Equal(t, "json/plain", string(decoded.GetPayloads()[0].GetMetadata()["encoding"]))
	require.Contains(t, string(decoded.GetPayloads()[0].GetData()), marker)

	book.scan(t, "worker log", readAll(t, r.WorkerLogs()...))
	assertNoConductorGroups(t, r)
}

// Every secret the worker reads from its environment (the Temporal
// connection's API key, mTLS key and certificate, gRPC headers and codec
// auth, the payload codec's current and earlier keys, the karvi token) is
// absent from the environment of every process of a running conductor's
// group, names and values alike.
func TestConductorEnvironmentHoldsNoWorkerSecret(t *testing.T) {
	t.Parallel()
	book := newSecretBook(7)
	cur := book.note("codec key", book.rand(hexDig, 64))
	old := book.note("old codec key", book.rand(hexDig, 64))
	curKey, err := codec.ParseKey(cur)
	require.NoError(t, err)
	oldKey, err := codec.ParseKey(old)
	require.NoError(t, err)
	keys, err := codec.NewKeys(curKey, oldKey)
	require.NoError(t, err)
	secretEnv := map[string]string{
		codec.EnvKey:                       cur,
		codec.EnvOldKeys:                   old,
		"KARVI_API_TOKEN":                  book.note("karvi token", "kt"+book.rand(lower, 30)),
		"TEMPORAL_API_KEY":                 book.note("api key", book.rand(lower, 32)),
		"TEMPORAL_TLS_CLIENT_KEY_DATA":     book.note("client key", book.rand(lower, 32)),
		"TEMPORAL_TLS_CLIENT_CERT_DATA":    book.note("client cert", book.rand(lower, 32)),
		"TEMPORAL_CODEC_AUTH":              book.note("codec auth", book.rand(lower, 32)),
		"TEMPORAL_GRPC_META_X_KARVI_PROBE": book.note("grpc header", book.rand(lower, 32)),
	}
	// TLS off: the dev server speaks plain gRPC, and envconfig then leaves
	// the certificate data unread; the worker still has it all.
	env := []string{"TEMPORAL_TLS=false"}
	forbidden := []string{"TEMPORAL_", "KARVI_TEMPORAL", "KARVI_API_TOKEN"}
	for k, v := range secretEnv {
		env = append(env, k+"="+v)
		forbidden = append(forbidden, v)
	}
	r := newRig(t, testrig.Options{Scenario: "checks=pass", Env: env})
	ccl, err := client.Dial(client.Options{HostPort: r.Server.Addr, Namespace: r.Server.Namespace, DataConverter: codec.DataConverter(keys),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	require.NoError(t, err)
	defer ccl.Close()

	ctx := context.Background()
	run, err := ccl.ExecuteWorkflow(ctx, startOptions(r, taskapi.WorkflowID("EV1")), taskapi.TaskWorkflowName,
		taskapi.TaskInput{Dispatch: testrig.Dispatch(t, "EV1", "Environment task [sim phase=docs hang=forever]")})
	require.NoError(t, err)
	r.Track(run.GetID())
	s := keyedStatus(t, ccl, run.GetID(), "phase docs to run", func(s taskapi.Status) bool {
		return s.CurrentPhase == "docs" && s.ConductorPID != 0
	})
	h := conductorHandle(t, r, "EV1", s.PlanName)
	requireEnvFree(t, h.PGID, forbidden...)

	require.NoError(t, ccl.SignalWorkflow(ctx, run.GetID(), "", taskapi.SignalAbort, taskapi.AbortSignal{Reason: "env test"}))
	var res taskapi.Result
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, "Plan aborted by user", res.Outcome.LastError)
	assertNoConductorGroups(t, r)
}

// keyedStatus waits, through a client with the payload key, until the
// task's status query answers what cond wants; query errors count as no
// answer yet.
func keyedStatus(t *testing.T, ccl client.Client, workflowID, what string, cond func(taskapi.Status) bool) taskapi.Status {
	t.Helper()
	var s taskapi.Status
	wait.Eventually(t, 2*time.Minute, what, func() (any, bool) {
		if v, err := ccl.QueryWorkflow(context.Background(), workflowID, "", taskapi.QueryStatus); err == nil {
			require.NoError(t, v.Get(&s))
		}
		return s, cond(s)
	})
	return s
}
