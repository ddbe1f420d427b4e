//go:build realserver

package testrig

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/testkit/karvifake"
)

// Workspace makes the task's working directory a git repository the
// default checks of the "sequential" template pass in (see GitWorkspace).
func (r *Rig) Workspace(taskID string) string {
	r.t.Helper()
	dir := r.TaskDir(taskID)
	require.NoError(r.t, GitWorkspace(dir))
	return dir
}

// TaskDir is the conductor's cwd for a task without a workingDir.
func (r *Rig) TaskDir(taskID string) string { return filepath.Join(r.WorkRoot, "tasks", taskID) }

// EventsPath is a plan's events.jsonl as the conductor writes it.
func (r *Rig) EventsPath(taskID, plan string) string {
	return filepath.Join(r.TaskDir(taskID), ".edda", "conductor", plan, "events.jsonl")
}

// Events are a plan's conductor events, decoded.
func (r *Rig) Events(taskID, plan string) []map[string]any {
	return ReadJSONL(r.t, r.EventsPath(taskID, plan))
}

// FileBriefRaw is the brief.json the file sink holds for a task, as stored.
func (r *Rig) FileBriefRaw(taskID string) []byte {
	r.t.Helper()
	data, err := os.ReadFile(filepath.Join(r.SinkDir, taskID, "brief.json"))
	require.NoError(r.t, err)
	return data
}

// FileBrief is what the file sink holds for a task: the merged brief,
// without what depends on the clock.
func (r *Rig) FileBrief(taskID string) map[string]any {
	r.t.Helper()
	return NormalizeBrief(r.t, r.FileBriefRaw(taskID))
}

// FilePatches are the PATCH bodies the file sink received, in order.
func (r *Rig) FilePatches(taskID string) []map[string]any {
	r.t.Helper()
	recs := ReadJSONL(r.t, filepath.Join(r.SinkDir, taskID, "patches.jsonl"))
	out := make([]map[string]any, 0, len(recs))
	for _, rec := range recs {
		body, ok := rec["body"].(map[string]any)
		require.True(r.t, ok, "patch record without body: %v", rec)
		out = append(out, body)
	}
	return out
}

// FileStatus is the file sink's status.json for a task.
func (r *Rig) FileStatus(taskID string) map[string]any {
	r.t.Helper()
	data, err := os.ReadFile(filepath.Join(r.SinkDir, taskID, "status.json"))
	require.NoError(r.t, err)
	var m map[string]any
	require.NoError(r.t, json.Unmarshal(data, &m))
	return m
}

// AddKarviTask gives the rig's karvifake a task with an empty brief, as
// karvi has it when it dispatches (status "dispatched").
func (r *Rig) AddKarviTask(taskID string) {
	r.t.Helper()
	require.NotNil(r.t, r.Karvi, "rig has no karvifake (sink karvi without KarviURL)")
	require.NoError(r.t, r.Karvi.AddTask(karvifake.Task{ID: taskID, Title: "task " + taskID,
		Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)}))
}

// KarviBrief is the brief karvifake holds for a task, normalized and with
// null values dropped: PATCH cannot delete a key, so a redispatch resets
// the previous attempt's keys to null, which reads as absent.
func (r *Rig) KarviBrief(taskID string) map[string]any {
	r.t.Helper()
	b := r.Karvi.Brief(taskID)
	require.NotNil(r.t, b, "karvi has no brief for %s", taskID)
	return Normalize(DropNulls(b)).(map[string]any)
}

// KarviPatches are the brief PATCH bodies karvifake accepted for a task, in
// arrival order.
func (r *Rig) KarviPatches(taskID string) []json.RawMessage {
	var out []json.RawMessage
	for _, w := range r.Karvi.Writes(taskID) {
		if w.Method == "PATCH" && strings.HasPrefix(w.Path, "/api/brief/") {
			out = append(out, w.Body)
		}
	}
	return out
}

// KarviStatus is the task's status in karvifake.
func (r *Rig) KarviStatus(taskID string) string {
	r.t.Helper()
	task, ok := r.Karvi.Task(taskID)
	require.True(r.t, ok, "karvi has no task %s", taskID)
	return task.Status
}

// ReadJSONL decodes a file of JSON objects, one per line; blank lines are
// skipped.
func ReadJSONL(t testing.TB, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "%s: line %q", path, sc.Text())
		out = append(out, m)
	}
	require.NoError(t, sc.Err(), path)
	return out
}
