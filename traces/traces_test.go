package traces

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/mapping"
)

func TestForTask(t *testing.T) {
	cases := []struct {
		task, plan, slug string
	}{
		{"T5", "", ""},
		{"T5", "plan-7", ""},
		{"api", "run-user-profiles-api", "user-profiles"},
		{"api", "run--api", ""},        // no slug
		{"api", "run-x-apix", ""},      // not this task's
		{"", "run-user-profiles-", ""}, // no task
	}
	for _, c := range cases {
		if got := ForTask(c.task, c.plan).RunSlug; got != c.slug {
			t.Errorf("ForTask(%q, %q).RunSlug = %q, want %q", c.task, c.plan, got, c.slug)
		}
	}
}

func TestIdentityTree(t *testing.T) {
	solo := Identity{TaskID: "T5"}
	if solo.TaskSpanID() != solo.RootSpanID() || solo.TaskParentID().IsValid() {
		t.Error("a task without a run must be its trace's root")
	}
	inRun := ForTask("api", "run-user-profiles-api")
	run := ForRun("user-profiles")
	if inRun.TraceID() != run.TraceID() {
		t.Error("a run's task must be in the run's trace")
	}
	if inRun.TaskParentID() != run.RootSpanID() || inRun.TaskSpanID() == run.RootSpanID() {
		t.Error("a run's task must hang under the run's span")
	}
	if solo.TraceID() == (Identity{TaskID: "T6"}).TraceID() {
		t.Error("two tasks share a trace")
	}
	if solo.TraceID() == (Identity{RunSlug: "T5"}).TraceID() {
		t.Error("a task and a run of the same name share a trace")
	}
	ids := map[trace.SpanID]string{}
	add := func(name string, id trace.SpanID) {
		if !id.IsValid() {
			t.Errorf("%s: invalid span id", name)
		}
		if other, dup := ids[id]; dup {
			t.Errorf("%s and %s share span id %s", name, other, id)
		}
		ids[id] = name
	}
	add("root", solo.RootSpanID())
	add("attempt 1", solo.AttemptSpanID(1))
	add("attempt 2", solo.AttemptSpanID(2))
	p1 := solo.PhaseSpanID(1, "karvi-T5-r1-aa", mapping.Position{Offset: 100})
	add("phase at 100", p1)
	add("phase at 200", solo.PhaseSpanID(1, "karvi-T5-r1-aa", mapping.Position{Offset: 200}))
	add("phase at 100 gen 1", solo.PhaseSpanID(1, "karvi-T5-r1-aa", mapping.Position{Gen: 1, Offset: 100}))
	add("phase at 100 attempt 2", solo.PhaseSpanID(2, "karvi-T5-r1-aa", mapping.Position{Offset: 100}))
	add("turn 0", solo.ChildSpanID(p1, "turn", "0"))
	add("tool 0", solo.ChildSpanID(p1, "tool", "0"))
	if solo.PhaseSpanID(1, "karvi-T5-r1-aa", mapping.Position{Offset: 100}) != p1 {
		t.Error("the same phase end made two ids")
	}
	sc := solo.RootContext()
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() || sc.SpanID() != solo.RootSpanID() {
		t.Errorf("RootContext = %+v", sc)
	}
}

// transcriptLines is a phase attempt as Claude Code's stream-json shows
// it: init, a message in two content-block lines with a tool call, its
// result, a second call without timestamps, a rate limit, the result.
func transcriptLines() [][]byte {
	ls := []string{
		`{"type":"system","subtype":"init","session_id":"0f1e2d3c-aaaa-bbbb-cccc-000000000000","model":"claude-sonnet-4-5","tools":["Read","Bash"]}`,
		`{"type":"assistant","timestamp":"2026-01-02T10:00:01Z","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Let me read it."}],"usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":5}}}`,
		`{"type":"assistant","timestamp":"2026-01-02T10:00:02Z","message":{"id":"msg_1","model":"claude-sonnet-4-5","stop_reason":"tool_use","content":[{"type":"tool_use","id":"toolu_01","name":"Read","input":{"file_path":"a.go"}}],"usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":7}}}`,
		`{"type":"user","timestamp":"2026-01-02T10:00:04Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"package a"}]}}`,
		`not json`,
		`{"type":"assistant","message":{"id":"msg_2","content":[{"type":"tool_use","id":"toolu_02","name":"Bash","input":{"command":"go test ./..."}}],"usage":{"input_tokens":200,"output_tokens":9}}}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_02","is_error":true,"content":[{"type":"text","text":"FAIL a"}]}]}}`,
		`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1767348000,"rateLimitType":"five_hour"}}`,
		`{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.25,"num_turns":2,"usage":{"input_tokens":300,"output_tokens":21},"result":"done"}`,
	}
	out := make([][]byte, len(ls))
	for i, l := range ls {
		out[i] = []byte(l)
	}
	return out
}

func TestParseTranscript(t *testing.T) {
	tr := ParseTranscript(transcriptLines())
	if tr.Lines != 9 || tr.Malformed != 1 {
		t.Errorf("lines %d malformed %d, want 9 and 1", tr.Lines, tr.Malformed)
	}
	if tr.Model != "claude-sonnet-4-5" || tr.Session != "0f1e2d3c-aaaa-bbbb-cccc-000000000000" {
		t.Errorf("model %q session %q", tr.Model, tr.Session)
	}
	if len(tr.Turns) != 2 {
		t.Fatalf("turns = %+v, want 2 (a message's blocks are one turn)", tr.Turns)
	}
	if tu := tr.Turns[0]; tu.Line != 1 || tu.Last != 2 || tu.InputTokens != 100 || tu.OutputTokens != 7 ||
		tu.Text != "Let me read it." || tu.ToolCalls != 1 || tu.Stop != "tool_use" {
		t.Errorf("turn 0 = %+v", tu)
	}
	want := []ToolCall{
		{ID: "toolu_01", Name: "Read", Line: 2, ResultLine: 3, Input: `{"file_path":"a.go"}`, Output: "package a"},
		{ID: "toolu_02", Name: "Bash", Line: 5, ResultLine: 6, Input: `{"command":"go test ./..."}`, Output: "FAIL a", IsError: true},
	}
	if fmt.Sprint(tr.Tools) != fmt.Sprint(want) {
		t.Errorf("tools =\n%+v\nwant\n%+v", tr.Tools, want)
	}
	if r := tr.Result; r == nil || *r.CostUSD != 0.25 || r.InputTokens != 300 || r.OutputTokens != 21 || r.NumTurns != 2 {
		t.Errorf("result = %+v", r)
	}
	if len(tr.Limits) != 1 || tr.Limits[0].Status != "allowed_warning" || tr.Limits[0].ResetsAt != 1767348000 {
		t.Errorf("limits = %+v", tr.Limits)
	}
}

func TestPlace(t *testing.T) {
	start := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	end := start.Add(10 * time.Second)
	tr := ParseTranscript(transcriptLines())
	at := tr.Place(start, end)
	if len(at) != 9 {
		t.Fatalf("%d times for 9 lines", len(at))
	}
	for i := 1; i < len(at); i++ {
		if at[i].Before(at[i-1]) {
			t.Errorf("line %d at %v before line %d at %v", i, at[i], i-1, at[i-1])
		}
	}
	if !at[1].Equal(start.Add(time.Second)) || !at[3].Equal(start.Add(4*time.Second)) {
		t.Errorf("timestamped lines moved: %v %v", at[1], at[3])
	}
	if !at[0].After(start) || !at[0].Before(at[1]) {
		t.Errorf("line 0 at %v, want between the start and line 1", at[0])
	}
	// Lines 4..8 have no timestamp: spread from line 3 (4 s) to the end (10 s).
	if !at[8].Before(end) || !at[4].After(at[3]) {
		t.Errorf("untimed lines: %v", at[4:])
	}
	// A timestamp outside the phase is kept inside it.
	late := ParseTranscript([][]byte{[]byte(`{"type":"user","timestamp":"2030-01-01T00:00:00Z"}`)})
	if got := late.Place(start, end)[0]; !got.Equal(end) {
		t.Errorf("a late line placed at %v, want the end", got)
	}
}

func phaseRun(typ string, tr *Transcript) PhaseRun {
	cost := 0.5
	end := mapping.Event{Pos: mapping.Position{Offset: 321}, TS: "2026-01-02T10:00:10Z", Type: typ,
		PhaseID: "implement", Attempt: 2, DurationMS: 10000}
	if typ == mapping.EventPhasePassed {
		end.CostUSD = &cost
	}
	if typ == mapping.EventPhaseFailed {
		end.Error, end.ErrorType = "check failed: go test", "check_failed"
	}
	return PhaseRun{ID: Identity{TaskID: "T5"}, Attempt: 1, Plan: "karvi-T5-r1-0a0b0c0d", End: end,
		Transcript: tr, TranscriptName: "implement-0f1e2d3c.jsonl"}
}

func attr(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestPhaseSpans(t *testing.T) {
	tr := ParseTranscript(transcriptLines())
	spans := PhaseSpans(phaseRun(mapping.EventPhasePassed, &tr))
	if len(spans) != 5 {
		t.Fatalf("%d spans, want the phase, 2 turns, 2 tools", len(spans))
	}
	ph := spans[0]
	id := Identity{TaskID: "T5"}
	if ph.Parent != id.AttemptSpanID(1) || ph.TraceID != id.TraceID() {
		t.Error("the phase span is not under attempt 1 of the task's trace")
	}
	if ph.Name != "invoke_agent implement" || ph.Status != codes.Ok {
		t.Errorf("phase span %q status %v", ph.Name, ph.Status)
	}
	if !ph.Start.Equal(time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)) || !ph.End.Equal(ph.Start.Add(10*time.Second)) {
		t.Errorf("phase span from %v to %v", ph.Start, ph.End)
	}
	for key, want := range map[string]attribute.Value{
		AttrOperation:      attribute.StringValue(OpInvokeAgent),
		AttrProvider:       attribute.StringValue("anthropic"),
		AttrRequestModel:   attribute.StringValue("claude-sonnet-4-5"),
		AttrCostUSD:        attribute.Float64Value(0.25), // the transcript's, as the brief counts it
		AttrInputTokens:    attribute.Int64Value(300),
		AttrOutputTokens:   attribute.Int64Value(21),
		AttrPhaseAttempt:   attribute.IntValue(2),
		AttrAttempt:        attribute.IntValue(1),
		AttrTaskID:         attribute.StringValue("T5"),
		AttrPhaseOutcome:   attribute.StringValue("passed"),
		AttrConversationID: attribute.StringValue("0f1e2d3c-aaaa-bbbb-cccc-000000000000"),
	} {
		if got, ok := attr(ph.Attrs, key); !ok || got != want {
			t.Errorf("phase %s = %v, want %v", key, got.String(), want.String())
		}
	}
	var tools, turns int
	for _, s := range spans[1:] {
		if s.Parent != ph.SpanID {
			t.Errorf("%s is not under the phase", s.Name)
		}
		if s.Start.Before(ph.Start) || s.End.After(ph.End) || s.End.Before(s.Start) {
			t.Errorf("%s from %v to %v: outside the phase or backwards", s.Name, s.Start, s.End)
		}
		op, _ := attr(s.Attrs, AttrOperation)
		switch op.AsString() {
		case OpExecuteTool:
			tools++
		case OpChat:
			turns++
		}
	}
	if tools != 2 || turns != 2 {
		t.Errorf("%d tool spans and %d turn spans", tools, turns)
	}
	bash := spans[4]
	if bash.Name != "execute_tool Bash" || bash.Status != codes.Error {
		t.Errorf("the failed tool call: %q %v", bash.Name, bash.Status)
	}
	if v, _ := attr(bash.Attrs, AttrToolCallID); v.AsString() != "toolu_02" {
		t.Errorf("tool call id %v", v.String())
	}
	if len(ph.Events) != 2 || ph.Events[0].Name != "check" || ph.Events[1].Name != "rate_limit" {
		t.Errorf("phase events %+v", ph.Events)
	}
	// The same input makes the same spans.
	if fmt.Sprint(PhaseSpans(phaseRun(mapping.EventPhasePassed, &tr))) != fmt.Sprint(spans) {
		t.Error("PhaseSpans is not deterministic")
	}
}

func TestPhaseSpansWithoutTranscript(t *testing.T) {
	spans := PhaseSpans(phaseRun(mapping.EventPhaseFailed, nil))
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Status != codes.Error || s.StatusMsg != "check failed: go test" {
		t.Errorf("status %v %q", s.Status, s.StatusMsg)
	}
	if v, _ := attr(s.Attrs, AttrErrorType); v.AsString() != "check_failed" {
		t.Errorf("error.type %v", v.String())
	}
	if len(s.Events) != 1 || s.Events[0].Name != "check" {
		t.Errorf("events %+v", s.Events)
	}
	if _, ok := attr(s.Attrs, AttrCostUSD); ok {
		t.Error("a failed phase without a transcript has no cost to tell")
	}
	skipped := PhaseSpans(phaseRun(mapping.EventPhaseSkipped, nil))[0]
	if skipped.Status != codes.Unset {
		t.Errorf("a skipped phase's status is %v", skipped.Status)
	}
}

func TestSealMasksSecrets(t *testing.T) {
	const key = "sk-ant-api03-Zx8Qm2Vb7Nc4Lk1Jh6Gf3Ds9Aa0Ww5Ee"
	lines := [][]byte{
		[]byte(`{"type":"assistant","message":{"id":"msg_01ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef","content":[{"type":"text","text":"using ` + key + `"},{"type":"tool_use","id":"toolu_01ABCDEFGHIJKLMNOPQRSTUVWXYZ","name":"Bash","input":{"command":"curl -H 'Authorization: Bearer ` + key + `'"}}]}}`),
		[]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_01ABCDEFGHIJKLMNOPQRSTUVWXYZ","content":"token=` + key + `"}]}}`),
	}
	tr := ParseTranscript(lines)
	r := phaseRun(mapping.EventPhaseFailed, &tr)
	r.End.Error = "agent printed " + key
	sealed := Seal(PhaseSpans(r))
	text := fmt.Sprintf("%+v", sealed)
	if strings.Contains(text, key) || strings.Contains(text, "Zx8Qm2Vb7Nc4") {
		t.Errorf("a secret survived sealing: %s", text)
	}
	for _, s := range sealed {
		if s.Name == "execute_tool Bash" {
			if v, _ := attr(s.Attrs, AttrToolCallID); v.AsString() != "toolu_01ABCDEFGHIJKLMNOPQRSTUVWXYZ" {
				t.Errorf("the tool call's id was masked: %q", v.AsString())
			}
		}
	}
}

func step(kind canonical.StepKind, seq int, at time.Time, f func(*canonical.Step)) canonical.Event {
	s := canonical.Step{Kind: kind, Seq: seq, TS: at, Plan: "karvi-T5-r1-0a0b0c0d"}
	if f != nil {
		f(&s)
	}
	return canonical.FromStep(s, canonical.StepContext{RunID: "run-T5", TaskID: "T5", Source: "temporal://default/workflows/karvi-task-T5/r1"})
}

func TestStreamSpans(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	id := Identity{TaskID: "T5"}
	c1, c2 := 0.5, 0.25
	evs := []canonical.Event{
		step(canonical.StepTaskStarted, 1, t0, func(s *canonical.Step) { s.Title = "Add a login page"; s.Attempt = 1 }),
		step(canonical.StepAttemptStarted, 2, t0.Add(time.Second), func(s *canonical.Step) { s.Attempt = 1 }),
		{TS: "2026-01-02T10:00:03.000Z", AgentID: "implement", Type: canonical.TypeTaskDone}, // a conductor event: not the workflow's
		step(canonical.StepNote, 3, t0.Add(4*time.Second), func(s *canonical.Step) {
			s.Reason, s.Status = "Budget warning: $0.41 spent of $0.50 (82%)", "budget"
		}),
		step(canonical.StepSignal, 4, t0.Add(5*time.Second), func(s *canonical.Step) { s.Signal, s.Reason = "redispatch", "try again" }),
		step(canonical.StepAttemptEnded, 5, t0.Add(6*time.Second), func(s *canonical.Step) {
			s.Attempt, s.Status, s.Reason, s.CostUSD = 1, "redispatched", "redispatch requested", &c1
		}),
		step(canonical.StepAttemptStarted, 6, t0.Add(7*time.Second), func(s *canonical.Step) { s.Attempt = 2 }),
	}
	got := StreamSpans(id, evs)
	if len(got) != 1 || got[0].SpanID != id.AttemptSpanID(1) {
		t.Fatalf("before the end: %+v, want attempt 1's span alone", got)
	}
	a1 := got[0]
	if a1.Parent != id.TaskSpanID() || a1.Status != codes.Error || !a1.Start.Equal(t0.Add(time.Second)) || !a1.End.Equal(t0.Add(6*time.Second)) {
		t.Errorf("attempt 1: %+v", a1)
	}
	if len(a1.Events) != 2 || a1.Events[0].Name != "budget" || a1.Events[1].Name != "redispatch" {
		t.Errorf("attempt 1's events: %+v", a1.Events)
	}
	evs = append(evs,
		step(canonical.StepAttemptEnded, 7, t0.Add(9*time.Second), func(s *canonical.Step) {
			s.Attempt, s.Status, s.CostUSD = 2, "completed", &c2
		}),
		step(canonical.StepTaskStatus, 8, t0.Add(10*time.Second), func(s *canonical.Step) { s.Status = "completed" }),
	)
	got = StreamSpans(id, evs)
	if len(got) != 3 {
		t.Fatalf("%d spans at the end, want 2 attempts and the task", len(got))
	}
	task := got[2]
	if task.SpanID != id.RootSpanID() || task.Parent.IsValid() || task.Status != codes.Ok ||
		!task.Start.Equal(t0) || !task.End.Equal(t0.Add(10*time.Second)) {
		t.Errorf("task span: %+v", task)
	}
	if v, _ := attr(task.Attrs, AttrCostUSD); v.AsFloat64() != 0.75 {
		t.Errorf("the task's cost is %v, want its attempts' 0.75", v.String())
	}
	if got[1].Status != codes.Ok {
		t.Errorf("attempt 2: %v", got[1].Status)
	}
	// The stream read again, or a stored step read twice, makes the same spans.
	again := StreamSpans(id, append(evs, evs[len(evs)-1]))
	if fmt.Sprint(again) != fmt.Sprint(got) {
		t.Error("StreamSpans changed with a repeated step")
	}
}

func TestStreamSpansRoundTrip(t *testing.T) {
	// The stream is read back from its file: events survive JSON.
	ev := step(canonical.StepTaskStarted, 1, time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC), nil)
	data, _ := json.Marshal(ev)
	back, err := canonical.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(StreamSpans(Identity{TaskID: "T5"}, []canonical.Event{back})) != 0 {
		t.Error("a task that has not ended has a span")
	}
}

func TestRunSpans(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	ctx := canonical.StepContext{RunID: canonical.RunIDForRun("profiles"), TaskID: "profiles", Source: "temporal://default/workflows/karvi-run-profiles/r1"}
	rs := func(seq int, s canonical.RunStep) canonical.Event {
		s.Seq, s.TS = seq, t0.Add(time.Duration(seq)*time.Second)
		return canonical.FromRunStep(s, ctx)
	}
	evs := []canonical.Event{
		rs(1, canonical.RunStep{To: "active"}),
		rs(2, canonical.RunStep{Task: "api", To: "queued"}),
		rs(3, canonical.RunStep{From: "active", To: "paused", Reason: "paused by a person"}),
		rs(4, canonical.RunStep{From: "paused", To: "active"}),
		rs(5, canonical.RunStep{To: "budget", Reason: "Budget warning: $8 spent of $10 (80%)"}),
	}
	if got := RunSpans("profiles", evs); got != nil {
		t.Fatalf("a run not ended has a span: %+v", got)
	}
	evs = append(evs, rs(6, canonical.RunStep{From: "active", To: "partial", Reason: "1 task failed"}))
	got := RunSpans("profiles", evs)
	if len(got) != 1 {
		t.Fatalf("%d spans", len(got))
	}
	run := got[0]
	id := ForRun("profiles")
	if run.SpanID != id.RootSpanID() || run.TraceID != id.TraceID() || run.Parent.IsValid() {
		t.Errorf("the run's span is not its trace's root: %+v", run)
	}
	if !run.Start.Equal(t0.Add(time.Second)) || !run.End.Equal(t0.Add(6*time.Second)) || run.Status != codes.Error {
		t.Errorf("run span %v to %v, status %v", run.Start, run.End, run.Status)
	}
	var names []string
	for _, e := range run.Events {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "paused,resumed,budget" {
		t.Errorf("run events %v", names)
	}
}
