//go:build realserver

package faults

// The fault suite's own part of the rig: testkit/testrig runs the
// processes, this file adds the invariants every fault test checks at its
// end (one conductor process per attempt, one brief log entry per event, a
// brief that equals what its events make).

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/testrig"
)

func TestMain(m *testing.M) { testrig.Main(m, "faults") }

// rig is testrig's rig with the fault suite's checks as methods.
type rig struct{ *testrig.Rig }

func newRig(t *testing.T, o testrig.Options) *rig { return &rig{testrig.New(t, o)} }

// reducedBrief is the brief mapping's reducer makes of a plan's
// events.jsonl, as written on disk (none when the conductor never started),
// normalized without nulls: what the sink must hold when no event was lost
// or applied twice on the way.
func (r *rig) reducedBrief(taskID, plan string) map[string]any {
	st := r.reduced(taskID, plan)
	return testrig.Normalize(testrig.DropNulls(testrig.JSONValue(r.T(), st.Brief))).(map[string]any)
}

// settledBrief is reducedBrief settled with how the attempt ended and the
// conductor's state.json, as the workflow's last patch settles it: what the
// sink must hold at the end of an attempt that wrote no terminal event.
func (r *rig) settledBrief(taskID, plan string, o mapping.Outcome) map[string]any {
	t := r.T()
	t.Helper()
	st := r.reduced(taskID, plan)
	var cs *mapping.ConductorState
	data, err := os.ReadFile(filepath.Join(filepath.Dir(r.EventsPath(taskID, plan)), "state.json"))
	if err == nil {
		if parsed, err := mapping.ParseConductorState(data); err == nil {
			cs = &parsed
		}
	}
	st.Settle(o, cs, "")
	return testrig.Normalize(testrig.DropNulls(testrig.JSONValue(t, st.Brief))).(map[string]any)
}

func (r *rig) reduced(taskID, plan string) mapping.BriefState {
	t := r.T()
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.WorkRoot, "runs", taskID, plan, "plan.yaml"))
	require.NoError(t, err)
	p, err := mapping.ParsePlan(data)
	require.NoError(t, err)
	st := mapping.NewBriefState(taskID, p.Summary())
	raw, err := os.ReadFile(r.EventsPath(taskID, plan))
	if errors.Is(err, fs.ErrNotExist) {
		raw, err = nil, nil // the conductor never started: the skeleton only
	}
	require.NoError(t, err)
	off := int64(0)
	for line := range bytes.SplitSeq(raw, []byte{'\n'}) {
		at := off
		off += int64(len(line)) + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := mapping.ParseEvent(line)
		require.NoError(t, err, "event at offset %d", at)
		ev.Pos = mapping.Position{Offset: at}
		st.Reduce(ev)
	}
	// What the conductor spent (state.json, transcripts) raises the costs
	// at the delivery's last checkpoint, as it does in the runtime.
	if sp, ok := taskact.ConductorSpend(filepath.Join(filepath.Dir(r.EventsPath(taskID, plan)), "state.json")); ok {
		st.ApplySpend(sp)
	}
	return st
}

// singleRun asserts that one conductor process wrote a plan's events.jsonl
// from start to end, and returns the events. Every edda (and simulator)
// process numbers its events from seq 0 and a resumed run writes no
// plan_start, so a second process for the same attempt shows as a second
// plan_start or as seq going back.
func (r *rig) singleRun(taskID, plan string) []map[string]any {
	t := r.T()
	t.Helper()
	evs := r.Events(taskID, plan)
	require.NotEmpty(t, evs, "%s: no events", plan)
	require.Equal(t, "plan_start", evs[0]["type"], "%s: first event", plan)
	oneWriter(t, plan, evs)
	hs, err := filepath.Glob(filepath.Join(r.WorkRoot, "runs", taskID, plan, "handle.json"))
	require.NoError(t, err)
	require.Len(t, hs, 1, "%s: one run record", plan)
	return evs
}

// atMostOneRun asserts that no second conductor process wrote a plan's
// events.jsonl (see singleRun); a plan whose conductor never started has
// no events, which is fine here.
func (r *rig) atMostOneRun(taskID, plan string) {
	r.T().Helper()
	if _, err := os.Stat(r.EventsPath(taskID, plan)); err != nil {
		return
	}
	oneWriter(r.T(), plan, r.Events(taskID, plan))
}

// oneWriter asserts that the events come from one conductor process: seq
// counts up from 0 and no plan_start follows the first event.
func oneWriter(t *testing.T, plan string, evs []map[string]any) {
	t.Helper()
	for i, ev := range evs {
		require.Equal(t, float64(i), ev["seq"], "%s: event %d has seq %v: a second conductor process wrote here", plan, i, ev["seq"])
		if i > 0 {
			require.NotEqual(t, "plan_start", ev["type"], "%s: a second plan_start", plan)
		}
	}
}

// logPerEvent asserts that a brief's log has exactly one entry per
// conductor event, in order: none lost, none doubled. plan_aborted is the
// one event that writes no entry (the task status carries it instead), and
// the settling patch at the end of an attempt adds one of its own (agent
// "bridge"), which is not an event's.
func logPerEvent(t *testing.T, brief map[string]any, events []map[string]any) {
	t.Helper()
	var want []any
	for _, ev := range events {
		if ev["type"] != "plan_aborted" {
			want = append(want, ev["type"])
		}
	}
	log, _ := brief["log"].([]any)
	var got []any
	for _, e := range log {
		entry, _ := e.(map[string]any)
		if entry["agent"] == "bridge" {
			continue
		}
		got = append(got, entry["action"])
	}
	require.Equal(t, want, got, "brief log actions vs events.jsonl types")
}
