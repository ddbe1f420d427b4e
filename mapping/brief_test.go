package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func threePhaseState() BriefState {
	return NewBriefState("T5", PlanSummary{Name: "karvi-t5-020d01", PhaseIDs: []string{"implement", "test", "docs"}})
}

func at(off int64, line string) Event {
	ev, err := ParseEvent([]byte(line))
	if err != nil {
		panic(fmt.Sprintf("test event %s: %v", line, err))
	}
	ev.Pos = Position{Offset: off}
	return ev
}

func bodyWithoutLog(t *testing.T, p Patch) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p.Body, &m); err != nil {
		t.Fatalf("patch body is not an object: %v: %s", err, p.Body)
	}
	if _, ok := m["log"]; !ok {
		t.Fatalf("patch has no log: %s", p.Body)
	}
	if strings.HasPrefix(string(p.Body), `{"log":`) {
		return "{}"
	}
	// Cut the trailing ,"log":[...] while keeping key order.
	i := strings.LastIndex(string(p.Body), `,"log":`)
	if i < 0 {
		t.Fatalf("log is not the last key: %s", p.Body)
	}
	return string(p.Body[:i]) + "}"
}

func TestNewBriefStateSkeleton(t *testing.T) {
	b := 5.0
	s := NewBriefState("T5", PlanSummary{Name: "n", PhaseIDs: []string{"a", "b", "a"}, BudgetUSD: &b})
	got, _ := json.Marshal(s.Brief)
	want := `{"meta":{"boardType":"brief","version":1,"taskId":"T5","runtime":"edda"},"plan":{"source":"generated","name":"n","totalPhases":2,"budget_usd":5},"phases":{"a":{"status":"pending"},"b":{"status":"pending"}},"completedPhases":0,"cost":{"by_phase":{}},"artifacts":[],"log":[]}`
	if string(got) != want {
		t.Errorf("skeleton\n got %s\nwant %s", got, want)
	}
	if !reflect.DeepEqual(s.PhaseOrder, []string{"a", "b"}) || s.LogLimit != DefaultLogLimit || s.HasApplied || s.ResetPrevious {
		t.Errorf("state %+v", s)
	}
	ip := s.initPatch()
	if ip.Type != PatchTypeInit || ip.Pos != (Position{}) {
		t.Errorf("init patch header %+v", ip)
	}
	wantInit := `{"meta":{"boardType":"brief","version":1,"taskId":"T5","runtime":"edda"},"plan":{"source":"generated","name":"n","totalPhases":2,"budget_usd":5},"phases":{"a":{"status":"pending"},"b":{"status":"pending"}},"completedPhases":0,"cost":{"by_phase":{}},"artifacts":[],"log":[]}`
	if string(ip.Body) != wantInit {
		t.Errorf("init patch\n got %s\nwant %s", ip.Body, wantInit)
	}
	if strings.Contains(string(ip.Body), "updatedAt") {
		t.Error("init patch sets meta.updatedAt")
	}
}

func TestInitPatchRedispatchResets(t *testing.T) {
	prev := threePhaseState()
	prev.PhaseOrder = append(prev.PhaseOrder, "lint")
	s := NewBriefState("T5", PlanSummary{Name: "karvi-t5-020d01-r2", PhaseIDs: []string{"implement", "test"}, Redispatch: true})
	if !s.ResetPrevious {
		t.Fatal("redispatch summary does not reset")
	}
	s.ForgetPrevious(prev)
	if !reflect.DeepEqual(s.StalePhases, []string{"docs", "lint"}) {
		t.Errorf("stale %v", s.StalePhases)
	}
	got := string(s.initPatch().Body)
	reset := `{"status":"pending","attempts":null,"duration_ms":null,"cost_usd":null,"startedAt":null,"completedAt":null,"error":null,"reason":null}`
	want := `{"meta":{"boardType":"brief","version":1,"taskId":"T5","runtime":"edda"},` +
		`"plan":{"source":"generated","name":"karvi-t5-020d01-r2","totalPhases":2,"budget_usd":null},` +
		`"phases":{"implement":` + reset + `,"test":` + reset + `,"docs":null,"lint":null},` +
		`"currentPhase":null,"completedPhases":0,` +
		`"cost":{"total_usd":null,"by_phase":{"implement":null,"test":null,"docs":null,"lint":null}},"artifacts":[],"log":[]}`
	if got != want {
		t.Errorf("redispatch init\n got %s\nwant %s", got, want)
	}
	// The state's own brief stays clean: nulls live only in the patch.
	if _, ok := s.Brief.Phases["docs"]; ok {
		t.Error("stale phase in state")
	}
}

func TestApplyEventTable(t *testing.T) {
	s := threePhaseState()
	steps := []struct {
		ev   Event
		body string // without the log
		log  LogEntry
	}{
		{at(0, `{"seq":0,"ts":"t0","type":"plan_start","plan_name":"karvi-T5","phase_count":3}`),
			`{"plan":{"name":"karvi-t5-020d01","totalPhases":3},"completedPhases":0}`,
			LogEntry{"t0", "conductor", "plan_start", "3 phases"}},
		{at(10, `{"seq":1,"ts":"t1","type":"phase_start","phase_id":"implement","attempt":1}`),
			`{"phases":{"implement":{"status":"running","attempts":1,"startedAt":"t1"}},"currentPhase":"implement"}`,
			LogEntry{"t1", "conductor", "phase_start", "implement"}},
		{at(20, `{"seq":2,"ts":"t2","type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":119000,"cost_usd":0.85}`),
			`{"phases":{"implement":{"status":"passed","attempts":1,"duration_ms":119000,"cost_usd":0.85,"completedAt":"t2"}},"completedPhases":1,"cost":{"by_phase":{"implement":0.85}}}`,
			LogEntry{"t2", "conductor", "phase_passed", "implement (119s, $0.85)"}},
		{at(30, `{"seq":3,"ts":"t3","type":"phase_start","phase_id":"test","attempt":1}`),
			`{"phases":{"test":{"status":"running","attempts":1,"startedAt":"t3"}},"currentPhase":"test"}`,
			LogEntry{"t3", "conductor", "phase_start", "test"}},
		{at(40, `{"seq":4,"ts":"t4","type":"phase_failed","phase_id":"test","attempt":1,"duration_ms":60000,"error":"check failed: cmd `+"`cargo test`"+` exited 1"}`),
			`{"phases":{"test":{"status":"failed","attempts":1,"error":"cmd ` + "`cargo test`" + ` exited 1"}}}`,
			LogEntry{"t4", "conductor", "phase_failed", "test (attempt 1): check failed: cmd `cargo test` exited 1"}},
		{at(50, `{"seq":5,"ts":"t5","type":"phase_start","phase_id":"test","attempt":2}`),
			`{"phases":{"test":{"status":"running","attempts":2,"startedAt":"t5"}},"currentPhase":"test"}`,
			LogEntry{"t5", "conductor", "phase_start", "test (attempt 2)"}},
		{at(60, `{"seq":6,"ts":"t6","type":"phase_passed","phase_id":"test","attempt":2,"duration_ms":1499,"cost_usd":null}`),
			`{"phases":{"test":{"status":"passed","attempts":2,"duration_ms":1499,"completedAt":"t6"}},"completedPhases":2}`,
			LogEntry{"t6", "conductor", "phase_passed", "test (1s)"}},
		{at(70, `{"seq":7,"ts":"t7","type":"phase_skipped","phase_id":"docs","reason":"no docs here"}`),
			`{"phases":{"docs":{"status":"skipped","reason":"no docs here"}},"completedPhases":3}`,
			LogEntry{"t7", "conductor", "phase_skipped", "docs: no docs here"}},
		{at(80, `{"seq":8,"ts":"t8","type":"gate_entered","phase_id":"docs"}`),
			`{}`,
			LogEntry{"t8", "conductor", "gate_entered", "docs"}},
		{at(90, `{"seq":9,"ts":"t9","type":"plan_completed","phases_passed":2,"total_cost_usd":null}`),
			`{"cost":{"total_usd":0.85}}`,
			LogEntry{"t9", "conductor", "plan_completed", "2 phases passed, $0.85"}},
	}
	for i, st := range steps {
		p, ok := apply(&s, st.ev)
		if !ok {
			t.Fatalf("step %d (%s): no patch", i, st.ev.Type)
		}
		if p.Pos != st.ev.Pos || p.Type != st.ev.Type {
			t.Errorf("step %d: patch header %+v", i, p)
		}
		if got := bodyWithoutLog(t, p); got != st.body {
			t.Errorf("step %d (%s)\n got %s\nwant %s", i, st.ev.Type, got, st.body)
		}
		var withLog struct{ Log []LogEntry }
		if err := json.Unmarshal(p.Body, &withLog); err != nil {
			t.Fatal(err)
		}
		if len(withLog.Log) != i+1 || withLog.Log[i] != st.log {
			t.Errorf("step %d: log %+v, want %d entries ending %+v", i, withLog.Log, i+1, st.log)
		}
		if !reflect.DeepEqual(withLog.Log, s.Brief.Log) {
			t.Errorf("step %d: patch log is not the whole state log", i)
		}
	}
	b := s.Brief
	if b.CompletedPhases != 3 || b.CurrentPhase != "test" || *b.Cost.TotalUSD != 0.85 || len(b.Cost.ByPhase) != 1 {
		t.Errorf("final brief %+v", b)
	}
	if ph := b.Phases["test"]; ph.Error != "cmd `cargo test` exited 1" || ph.CostUSD != nil || *ph.DurationMS != 1499 {
		t.Errorf("test phase %+v", ph)
	}
	if s.LastFailure != nil {
		t.Errorf("a passed phase should clear the failure, have %+v", s.LastFailure)
	}
	if !s.HasApplied || s.Applied != (Position{Offset: 90}) {
		t.Errorf("applied %+v %v", s.Applied, s.HasApplied)
	}
}

// An empty patch body would be "{" + "}"; the unknown-type patch has only a log.
func TestApplyUnknownTypeIsLogOnly(t *testing.T) {
	s := threePhaseState()
	before := s.Brief.Phases["docs"]
	p, ok := apply(&s, at(5, `{"type":"verdict_received","phase_id":"docs","reason":"approved"}`))
	if !ok {
		t.Fatal("no patch")
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(p.Body, &m)
	if len(m) != 1 || m["log"] == nil {
		t.Errorf("body %s", p.Body)
	}
	if s.Brief.Log[0].Detail != "docs: approved" || s.Brief.Phases["docs"] != before {
		t.Errorf("log %+v phase %+v", s.Brief.Log, s.Brief.Phases["docs"])
	}
	// A phase event for a phase the plan lacks is treated the same way.
	p, ok = apply(&s, at(6, `{"type":"phase_passed","phase_id":"ghost","cost_usd":9}`))
	if !ok || strings.Contains(string(p.Body), `"phases"`) || s.Brief.CompletedPhases != 0 || len(s.Brief.Cost.ByPhase) != 0 {
		t.Errorf("ghost phase changed the brief: %s", p.Body)
	}
	if _, ok := s.Brief.Phases["ghost"]; ok {
		t.Error("ghost phase added")
	}
}

func TestApplyReplayAndAbort(t *testing.T) {
	s := threePhaseState()
	ev := at(100, `{"type":"phase_start","phase_id":"implement","attempt":1,"ts":"a"}`)
	if _, ok := apply(&s, ev); !ok {
		t.Fatal("first apply")
	}
	snapshot, _ := json.Marshal(s)
	for _, replay := range []Event{ev, at(99, `{"type":"phase_passed","phase_id":"implement"}`), at(0, `{"type":"plan_start"}`)} {
		if p, ok := apply(&s, replay); ok || p.Body != nil {
			t.Errorf("replay at %v produced a patch", replay.Pos)
		}
	}
	ab := at(200, `{"type":"plan_aborted","phases_passed":0,"phases_pending":3}`)
	if p, ok := apply(&s, ab); ok || p.Body != nil {
		t.Error("plan_aborted produced a patch")
	}
	after, _ := json.Marshal(s)
	if string(snapshot) != string(after) {
		t.Errorf("no-op applies changed the state:\n%s\n%s", snapshot, after)
	}
	// A later generation is after any offset of an earlier one.
	ev2 := at(5, `{"type":"phase_passed","phase_id":"implement","attempt":1}`)
	ev2.Pos.Gen = 1
	if _, ok := apply(&s, ev2); !ok {
		t.Error("event in the next generation ignored")
	}
}

func TestApplyCompletedCountsOnce(t *testing.T) {
	s := threePhaseState()
	apply(&s, at(1, `{"type":"phase_passed","phase_id":"implement","attempt":1}`))
	apply(&s, at(2, `{"type":"phase_passed","phase_id":"implement","attempt":1}`))
	apply(&s, at(3, `{"type":"phase_skipped","phase_id":"implement"}`))
	if s.Brief.CompletedPhases != 1 {
		t.Errorf("completedPhases = %d", s.Brief.CompletedPhases)
	}
	apply(&s, at(4, `{"type":"phase_start","phase_id":"implement","attempt":2}`))
	if s.Brief.CompletedPhases != 0 {
		t.Errorf("a restarted phase still counts: %d", s.Brief.CompletedPhases)
	}
}

func TestApplyPlanCompletedTotals(t *testing.T) {
	s := threePhaseState()
	apply(&s, at(1, `{"type":"phase_passed","phase_id":"implement","cost_usd":0.85}`))
	apply(&s, at(2, `{"type":"phase_passed","phase_id":"test","cost_usd":0.42}`))
	apply(&s, at(3, `{"type":"phase_passed","phase_id":"docs","cost_usd":0.18}`))
	p, _ := apply(&s, at(4, `{"type":"plan_completed","phases_passed":3}`))
	if !strings.HasPrefix(string(p.Body), `{"cost":{"total_usd":1.45},`) {
		t.Errorf("summed total: %s", p.Body)
	}
	s2 := threePhaseState()
	p, _ = apply(&s2, at(1, `{"type":"plan_completed","phases_passed":1,"total_cost_usd":2.5}`))
	if !strings.HasPrefix(string(p.Body), `{"cost":{"total_usd":2.5},`) || s2.Brief.Log[0].Detail != "1 phase passed, $2.50" {
		t.Errorf("event total: %s", p.Body)
	}
}

func TestApplyLogLimit(t *testing.T) {
	s := threePhaseState()
	s.LogLimit = 3
	for i := 1; i <= 5; i++ {
		apply(&s, at(int64(i), fmt.Sprintf(`{"type":"tick","ts":"t%d"}`, i)))
	}
	if len(s.Brief.Log) != 3 || s.Brief.Log[0].Time != "t3" || s.Brief.Log[2].Time != "t5" {
		t.Errorf("log %+v", s.Brief.Log)
	}
	s.LogLimit = 0 // the default applies
	for i := 6; i < 6+DefaultLogLimit+10; i++ {
		apply(&s, at(int64(i), `{"type":"tick"}`))
	}
	if len(s.Brief.Log) != DefaultLogLimit {
		t.Errorf("default limit: %d entries", len(s.Brief.Log))
	}
}

func TestApplyOnZeroState(t *testing.T) {
	var s BriefState
	p, ok := apply(&s, at(1, `{"type":"plan_start","plan_name":"x","phase_count":2}`))
	if !ok || s.Brief.Plan.Name != "x" || s.Brief.Plan.TotalPhases != 2 {
		t.Errorf("zero state: %s %+v", p.Body, s.Brief.Plan)
	}
	if _, ok := apply(&s, at(2, `{"type":"phase_start","phase_id":"a"}`)); !ok {
		t.Error("no patch")
	}
}

func TestBriefStateJSONRoundTrip(t *testing.T) {
	s := threePhaseState()
	for i, l := range readLines(t, "../testdata/examples/B/events.snake.jsonl") {
		ev, err := ParseEvent(l)
		if err != nil {
			t.Fatal(err)
		}
		ev.Pos = Position{Offset: int64(i * 100)}
		apply(&s, ev)
	}
	b1, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back BriefState
	if err := json.Unmarshal(b1, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back)
	if string(b1) != string(b2) {
		t.Errorf("round trip changed the state:\n%s\n%s", b1, b2)
	}
	// And the decoded state continues exactly like the original.
	next := at(5000, `{"type":"phase_start","phase_id":"docs","attempt":1,"ts":"x"}`)
	p1, _ := apply(&s, next)
	p2, _ := apply(&back, next)
	if string(p1.Body) != string(p2.Body) {
		t.Errorf("decoded state diverged:\n%s\n%s", p1.Body, p2.Body)
	}
}

func TestStripErrorPrefix(t *testing.T) {
	cases := map[string]string{
		"check failed: cmd `cargo test` exited 1": "cmd `cargo test` exited 1",
		"Check Failed: x":                         "x",
		"agent crashed: boom":                     "boom",
		"timeout: 300s":                           "300s",
		"cmd failed: x":                           "cmd failed: x",
		"check failed:":                           "check failed:",
		"":                                        "",
	}
	for in, want := range cases {
		if got := StripErrorPrefix(in); got != want {
			t.Errorf("StripErrorPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzApply(f *testing.F) {
	// Small seeds keep minimisation cheap; the fuzzer joins lines itself.
	b, err := readFileForFuzz("../testdata/examples/B/events.snake.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.Split(b, []byte("\n"))
	f.Add(bytes.Join(lines[:3], []byte("\n")), uint8(2))
	f.Add(bytes.Join(lines[3:6], []byte("\n")), uint8(1))
	f.Add([]byte(`{"type":"phase_passed","phase_id":"implement"}`+"\n"+`{"type":"phase_passed","phase_id":"implement"}`), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, replayEvery uint8) {
		s := threePhaseState()
		s.LogLimit = 7
		var off int64
		for i, line := range strings.Split(string(data), "\n") {
			pos := Position{Offset: off}
			off += int64(len(line)) + 1
			ev, err := ParseEvent([]byte(line))
			if err != nil {
				continue
			}
			ev.Pos = pos
			// Apply must make no patch exactly for replays and plan_aborted.
			noop := (s.HasApplied && !s.Applied.Less(ev.Pos)) || ev.Type == EventPlanAborted
			var before []byte
			if noop {
				before, _ = json.Marshal(s)
			}
			p, ok := apply(&s, ev)
			if ok == noop {
				t.Fatalf("Apply(%+v) = %v, want %v", ev, ok, !noop)
			}
			if ok {
				if !json.Valid(p.Body) || p.Pos != ev.Pos {
					t.Fatalf("bad patch %+v", p)
				}
				var m map[string]json.RawMessage
				if json.Unmarshal(p.Body, &m) != nil || m["log"] == nil {
					t.Fatalf("patch without log: %s", p.Body)
				}
			} else if after, _ := json.Marshal(s); string(before) != string(after) {
				t.Fatalf("no patch but state changed for %+v", ev)
			}
			if s.Brief.CompletedPhases < 0 || s.Brief.CompletedPhases > len(s.PhaseOrder) {
				t.Fatalf("completedPhases %d of %d", s.Brief.CompletedPhases, len(s.PhaseOrder))
			}
			if len(s.Brief.Log) > 7 || len(s.Brief.Phases) != len(s.PhaseOrder) {
				t.Fatalf("log %d phases %d", len(s.Brief.Log), len(s.Brief.Phases))
			}
			if replayEvery > 0 && i%int(replayEvery) == 0 {
				snap, _ := json.Marshal(s)
				if _, again := apply(&s, ev); again {
					t.Fatal("replay of the same position produced a patch")
				}
				if now, _ := json.Marshal(s); string(now) != string(snap) {
					t.Fatal("replay changed the state")
				}
			}
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back BriefState
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if b2, _ := json.Marshal(back); string(b2) != string(b) {
			t.Fatal("state does not round-trip through JSON")
		}
	})
}

// apply takes the workflow's two steps for one event: reduce it into the
// brief, then encode the change as a PATCH body.
func apply(s *BriefState, ev Event) (Patch, bool) {
	c, ok := s.Reduce(ev)
	if !ok {
		return Patch{}, false
	}
	var enc BriefEncoder
	return enc.Patch(s, c), true
}

func (s BriefState) initPatch() Patch {
	var enc BriefEncoder
	return enc.Init(&s)
}
