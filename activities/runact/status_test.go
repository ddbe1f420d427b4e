package runact

import (
	"context"
	"encoding/json"
	"os"
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
