package runact

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities"
)

// oldRender is how status.json was always written: the whole document
// decoded and indented, keys sorted.
func oldRender(t *testing.T, doc string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(doc), &v))
	data, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	return string(data) + "\n"
}

// A patch applies to the document this worker last wrote for the same
// writer, and the file is byte for byte what the whole document would
// give; without that base the answer is NeedBase and nothing is written.
func TestWriteRunStatusPatchesTheLastWrite(t *testing.T) {
	root := t.TempDir()
	a := &Activities{Config: activities.Config{WorkRoot: root}}
	ctx := context.Background()
	full := `{"prd_slug":"r","status":"active","tasks":{"b":{"status":"queued","model":"sonnet"},"a":{"status":"running","model":"sonnet","error":"<x> & y"}}}`
	_, err := a.WriteRunStatus(ctx, RunStatusRequest{Slug: "r", Document: json.RawMessage(full), Writer: "w1", Seq: 1})
	require.NoError(t, err)
	read := func() string {
		data, err := os.ReadFile(RunStatusPath(root, "r"))
		require.NoError(t, err)
		return string(data)
	}
	require.Equal(t, oldRender(t, full), read())

	patch := RunStatusRequest{Slug: "r", Writer: "w1", Seq: 2, Patch: true,
		Top:   json.RawMessage(`{"prd_slug":"r","status":"active","tasks":null}`),
		Tasks: map[string]json.RawMessage{"a": json.RawMessage(`{"status":"done","model":"sonnet","loop_count":1}`)}}
	res, err := a.WriteRunStatus(ctx, patch)
	require.NoError(t, err)
	require.False(t, res.NeedBase)
	after := `{"prd_slug":"r","status":"active","tasks":{"b":{"status":"queued","model":"sonnet"},"a":{"status":"done","model":"sonnet","loop_count":1}}}`
	require.Equal(t, oldRender(t, after), read())

	// The same patch again (a retry) is harmless.
	res, err = a.WriteRunStatus(ctx, patch)
	require.NoError(t, err)
	require.False(t, res.NeedBase)
	require.Equal(t, oldRender(t, after), read())

	for name, req := range map[string]RunStatusRequest{
		"another writer": {Slug: "r", Writer: "w2", Seq: 3, Patch: true, Top: patch.Top},
		"a write missed": {Slug: "r", Writer: "w1", Seq: 4, Patch: true, Top: patch.Top},
		"another run":    {Slug: "s", Writer: "w1", Seq: 3, Patch: true, Top: patch.Top},
	} {
		res, err := (&Activities{Config: a.Config, status: a.status}).WriteRunStatus(ctx, req)
		require.NoError(t, err, name)
		require.True(t, res.NeedBase, name)
	}
	require.Equal(t, oldRender(t, after), read())

	// A fresh worker holds nothing.
	res, err = (&Activities{Config: a.Config}).WriteRunStatus(ctx, RunStatusRequest{Slug: "r", Writer: "w1", Seq: 3, Patch: true, Top: patch.Top})
	require.NoError(t, err)
	require.True(t, res.NeedBase)

	// The final write forgets the run.
	_, err = a.WriteRunStatus(ctx, RunStatusRequest{Slug: "r", Writer: "w1", Seq: 3, Patch: true, Top: patch.Top, Final: true})
	require.NoError(t, err)
	require.Empty(t, a.status)
}

// bigStatus is a status document of n tasks, as a run of that size writes
// it, and the entries of five tasks that moved on.
func bigStatus(n int) (json.RawMessage, map[string]json.RawMessage) {
	tasks := map[string]any{}
	for i := range n {
		tasks[fmt.Sprintf("big-t%05d", i)] = map[string]any{"status": "done", "model": "sonnet", "loop_count": 1,
			"started_at": "2026-11-28T09:20:44.123456789Z", "completed_at": "2026-11-28T09:20:47.5Z", "blocked_by": []string{}}
	}
	doc, _ := json.Marshal(map[string]any{"prd_slug": "big", "status": "active", "created_at": "2026-11-28T09:20:44Z", "tasks": tasks})
	changed := map[string]json.RawMessage{}
	for i := range 5 {
		changed[fmt.Sprintf("big-t%05d", i*977)] = json.RawMessage(`{"status":"running","model":"opus","loop_count":2,"error":"<a> & \"b\""}`)
	}
	return doc, changed
}

// A write of a few changed entries to a 10,000-task document: what each
// status.json write of a large run costs its worker.
func BenchmarkWriteRunStatusPatch10000(b *testing.B) {
	a := &Activities{Config: activities.Config{WorkRoot: b.TempDir()}}
	ctx := context.Background()
	doc, changed := bigStatus(10000)
	if _, err := a.WriteRunStatus(ctx, RunStatusRequest{Slug: "big", Document: doc, Writer: "w", Seq: 1}); err != nil {
		b.Fatal(err)
	}
	top := json.RawMessage(`{"prd_slug":"big","status":"active","created_at":"2026-11-28T09:20:44Z","tasks":null}`)
	b.ResetTimer()
	for i := range b.N {
		res, err := a.WriteRunStatus(ctx, RunStatusRequest{Slug: "big", Writer: "w", Seq: i + 2, Patch: true, Top: top, Tasks: changed})
		if err != nil || res.NeedBase {
			b.Fatal(err, res.NeedBase)
		}
	}
}

// Whatever the document holds, a write gives the file json.MarshalIndent
// of the whole document gives, patch after patch: odd keys and values,
// tasks added by a patch, tasks empty, null or absent.
func TestStatusFileIsTheWholeDocumentIndented(t *testing.T) {
	root := t.TempDir()
	a := &Activities{Config: activities.Config{WorkRoot: root}}
	ctx := context.Background()
	read := func() string {
		data, err := os.ReadFile(RunStatusPath(root, "r"))
		require.NoError(t, err)
		return string(data)
	}
	for _, doc := range []string{
		`{"prd_slug":"r","tasks":{}}`,
		`{"prd_slug":"r","tasks":null}`,
		`{"z":1,"a":[],"m":{},"prd_slug":"r","summary":{"total":2,"by":{"done":[1,2.5,-3e-7,1e21]}},"tasks":{"é<&>":{"blocked_by":["a","b"],"x":{"y":[{}]}},"a\"b":{"status":"done","n":null,"t":true}}}`,
	} {
		_, err := a.WriteRunStatus(ctx, RunStatusRequest{Slug: "r", Document: json.RawMessage(doc), Writer: "w", Seq: 1})
		require.NoError(t, err)
		require.Equal(t, oldRender(t, doc), read(), doc)
	}
	top := json.RawMessage(`{"prd_slug":"r","status":"active","note":"<b>","tasks":null}`)
	patches := []map[string]json.RawMessage{
		{"é<&>": json.RawMessage(`{"status":"running","blocked_by":[]}`)},
		{"new": json.RawMessage(`{"status":"queued"}`), "0first": json.RawMessage(`{"status":"queued","x":[[],[1]]}`)},
		{"a\"b": json.RawMessage(`{}`)},
	}
	want := map[string]any{"prd_slug": "r", "status": "active", "note": "<b>", "z": 1, "a": []any{}, "m": map[string]any{},
		"summary": map[string]any{"total": 2, "by": map[string]any{"done": []any{1, 2.5, -3e-7, 1e21}}},
		"tasks": map[string]any{"é<&>": map[string]any{"blocked_by": []any{"a", "b"}, "x": map[string]any{"y": []any{map[string]any{}}}},
			"a\"b": map[string]any{"status": "done", "n": nil, "t": true}}}
	for i, p := range patches {
		res, err := a.WriteRunStatus(ctx, RunStatusRequest{Slug: "r", Writer: "w", Seq: i + 2, Patch: true, Top: top, Tasks: p})
		require.NoError(t, err)
		require.False(t, res.NeedBase)
		delete(want, "z")
		delete(want, "a")
		delete(want, "m")
		delete(want, "summary")
		for id, raw := range p {
			var v any
			require.NoError(t, json.Unmarshal(raw, &v))
			want["tasks"].(map[string]any)[id] = v
		}
		doc, err := json.Marshal(want)
		require.NoError(t, err)
		require.Equal(t, oldRender(t, string(doc)), read(), "after patch %d", i)
	}
}

// A patch whose file cannot be written leaves the worker's document as it
// was: the retry of the same write, or the next, applies to it.
func TestAFailedStatusWriteLeavesTheBaseAsItWas(t *testing.T) {
	root := t.TempDir()
	a := &Activities{Config: activities.Config{WorkRoot: root}}
	ctx := context.Background()
	full := `{"prd_slug":"r","status":"active","tasks":{"a":{"status":"running"},"b":{"status":"queued"}}}`
	_, err := a.WriteRunStatus(ctx, RunStatusRequest{Slug: "r", Document: json.RawMessage(full), Writer: "w", Seq: 1})
	require.NoError(t, err)
	// A file where the run's directory goes: the write fails, even as root.
	dir := filepath.Dir(RunStatusPath(root, "r"))
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.WriteFile(dir, nil, 0o644))
	top := json.RawMessage(`{"prd_slug":"r","status":"active","tasks":null}`)
	_, err = a.WriteRunStatus(ctx, RunStatusRequest{Slug: "r", Writer: "w", Seq: 2, Patch: true, Top: top,
		Tasks: map[string]json.RawMessage{"a": json.RawMessage(`{"status":"done"}`), "c": json.RawMessage(`{"status":"queued"}`)}})
	require.Error(t, err)
	require.NoError(t, os.Remove(dir))
	res, err := a.WriteRunStatus(ctx, RunStatusRequest{Slug: "r", Writer: "w", Seq: 2, Patch: true, Top: top,
		Tasks: map[string]json.RawMessage{"b": json.RawMessage(`{"status":"running"}`)}})
	require.NoError(t, err)
	require.False(t, res.NeedBase)
	data, err := os.ReadFile(RunStatusPath(root, "r"))
	require.NoError(t, err)
	require.Equal(t, oldRender(t, `{"prd_slug":"r","status":"active","tasks":{"a":{"status":"running"},"b":{"status":"running"}}}`), string(data))
}
