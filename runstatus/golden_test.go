package runstatus

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The documents in testdata are KARIMO's own examples (the comment line of
// the completed one dropped, so it is JSON). Each must decode into these
// types and encode back to the same document: no field lost, renamed,
// added or respelled. Compared as JSON values, not bytes: the examples
// themselves order a task's fields differently from one another.
func TestGoldenRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		file string
		into func() any
	}{
		{"initial.json", func() any { return new(Status) }},
		{"active.json", func() any { return new(Status) }},
		{"complete.json", func() any { return new(Status) }},
		{"task_failed.json", func() any { return &map[string]*Task{} }},
		{"task_needs_human_rebase.json", func() any { return &map[string]*Task{} }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			v := tc.into()
			dec := json.NewDecoder(bytes.NewReader(want))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("decode: %v", err)
			}
			got, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, got, want) {
				t.Errorf("round trip changed the document\n got %s\nwant %s", got, want)
			}
		})
	}
}

// The spellings the reducer writes are the document's own.
func TestGoldenSpellings(t *testing.T) {
	var s Status
	data, err := os.ReadFile(filepath.Join("testdata", "active.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		got, want any
	}{
		{s.Status, RunActive},
		{s.ReconciliationStatus, ReconciliationPending},
		{s.Tasks["1a"].Status, TaskDone},
		{s.Tasks["1a"].WorktreeStatus, WorktreeCleaned},
		{s.Tasks["1b"].Status, TaskInReview},
		{s.Tasks["1b"].WorktreeStatus, WorktreeActive},
		{s.Tasks["2a"].Status, TaskRunning},
		{s.Tasks["2b"].Status, TaskQueued},
		{s.Tasks["3a"].Status, TaskBlocked},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("check %d: got %v, want %v", i, c.got, c.want)
		}
	}
	var rebase map[string]*Task
	data, err = os.ReadFile(filepath.Join("testdata", "task_needs_human_rebase.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rebase); err != nil {
		t.Fatal(err)
	}
	if got := rebase["2b"].Status; got != TaskNeedsHumanRebase {
		t.Errorf("rebase status %q", got)
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(va, vb)
}
