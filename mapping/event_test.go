package mapping

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func f64(f float64) *float64 { return &f }

func TestParseEventExampleLinesBothCasings(t *testing.T) {
	for _, ex := range []string{"A", "B"} {
		pascal := readLines(t, "../testdata/examples/"+ex+"/events.pascal.jsonl")
		snake := readLines(t, "../testdata/examples/"+ex+"/events.snake.jsonl")
		if len(pascal) != len(snake) || len(pascal) == 0 {
			t.Fatalf("%s: %d pascal lines, %d snake lines", ex, len(pascal), len(snake))
		}
		for i := range pascal {
			a, err := ParseEvent(pascal[i])
			if err != nil {
				t.Fatalf("%s pascal line %d: %v", ex, i+1, err)
			}
			b, err := ParseEvent(snake[i])
			if err != nil {
				t.Fatalf("%s snake line %d: %v", ex, i+1, err)
			}
			if a.Seq != int64(i+1) || b.Seq != int64(i) {
				t.Errorf("%s line %d: seq %d / %d", ex, i+1, a.Seq, b.Seq)
			}
			a.Seq, b.Seq = 0, 0
			// The document's events name the plan "karvi-T5"; the real
			// conductor runs the name PlanName made.
			if a.Type == EventPlanStart {
				if a.PlanName != "karvi-T5" || b.PlanName != PlanName("T5", 1) {
					t.Errorf("%s plan names %q / %q", ex, a.PlanName, b.PlanName)
				}
				a.PlanName, b.PlanName = "", ""
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s line %d differs by casing:\n%+v\n%+v", ex, i+1, a, b)
			}
		}
	}
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(mustReadFile(t, path)))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			out = append(out, append([]byte(nil), sc.Bytes()...))
		}
	}
	return out
}

func TestParseEventFields(t *testing.T) {
	cases := []struct {
		name string
		line string
		want Event
	}{
		{"plan_start", `{"seq":0,"ts":"T","type":"plan_start","plan_name":"karvi-t5","phase_count":3}`,
			Event{TS: "T", Type: EventPlanStart, PlanName: "karvi-t5", PhaseCount: 3}},
		{"PhaseStart", `{"seq":2,"ts":"T","type":"PhaseStart","phase_id":"implement","attempt":1}`,
			Event{Seq: 2, TS: "T", Type: EventPhaseStart, PhaseID: "implement", Attempt: 1}},
		{"phase_passed", `{"seq":3,"ts":"T","type":"phase_passed","phase_id":"a","attempt":2,"duration_ms":119000,"cost_usd":0.85}`,
			Event{Seq: 3, TS: "T", Type: EventPhasePassed, PhaseID: "a", Attempt: 2, DurationMS: 119000, CostUSD: f64(0.85)}},
		{"null cost", `{"seq":3,"ts":"T","type":"phase_passed","phase_id":"a","attempt":1,"duration_ms":5,"cost_usd":null}`,
			Event{Seq: 3, TS: "T", Type: EventPhasePassed, PhaseID: "a", Attempt: 1, DurationMS: 5}},
		{"zero cost is not null", `{"type":"phase_passed","phase_id":"a","cost_usd":0}`,
			Event{Type: EventPhasePassed, PhaseID: "a", CostUSD: f64(0)}},
		{"phase_failed with newer fields", `{"seq":4,"ts":"T","type":"phase_failed","phase_id":"a","attempt":1,"duration_ms":60000,"error":"check failed: x","error_type":"check_failed","env_retries":0,"attempt_charged":true}`,
			Event{Seq: 4, TS: "T", Type: EventPhaseFailed, PhaseID: "a", Attempt: 1, DurationMS: 60000, Error: "check failed: x", ErrorType: "check_failed"}},
		{"PhaseSkipped", `{"type":"PhaseSkipped","phase_id":"docs","reason":"not needed"}`,
			Event{Type: EventPhaseSkipped, PhaseID: "docs", Reason: "not needed"}},
		{"PlanCompleted", `{"type":"PlanCompleted","phases_passed":3,"total_cost_usd":1.45}`,
			Event{Type: EventPlanCompleted, PhasesPassed: 3, TotalCostUSD: f64(1.45)}},
		{"plan_completed null total", `{"type":"plan_completed","phases_passed":3,"total_cost_usd":null}`,
			Event{Type: EventPlanCompleted, PhasesPassed: 3}},
		{"PlanAborted", `{"type":"PlanAborted","phases_passed":1,"phases_pending":2}`,
			Event{Type: EventPlanAborted, PhasesPassed: 1, PhasesPending: 2}},
		{"unknown type kept", `{"seq":9,"type":"GateEntered","phase_id":"review","gate":"x"}`,
			Event{Seq: 9, Type: "gate_entered", PhaseID: "review"}},
		{"floats where ints go", `{"seq":1.0,"type":"phase_passed","attempt":2.0,"duration_ms":1500.7,"phase_count":3e0}`,
			Event{Seq: 1, Type: EventPhasePassed, Attempt: 2, DurationMS: 1500, PhaseCount: 3}},
		{"nulls everywhere", `{"seq":null,"ts":null,"type":"phase_start","phase_id":null,"attempt":null}`,
			Event{Type: EventPhaseStart}},
		{"surrounding whitespace and CR", " {\"type\":\"plan_start\"}\r\n",
			Event{Type: EventPlanStart}},
		{"pos is not parsed", `{"type":"plan_start","pos":{"gen":3,"offset":9}}`,
			Event{Type: EventPlanStart}},
		{"big seq", `{"type":"plan_start","seq":9007199254740993}`,
			Event{Type: EventPlanStart, Seq: 9007199254740993}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseEvent([]byte(c.line))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestParseEventMalformed(t *testing.T) {
	cases := map[string]string{
		"empty":             ``,
		"blank":             "  \n",
		"partial line":      `{"seq":1,"ts":"2026-02-28T03:00:00Z","ty`,
		"array":             `[{"type":"plan_start"}]`,
		"string":            `"plan_start"`,
		"number":            `42`,
		"missing type":      `{"seq":1,"ts":"T"}`,
		"null type":         `{"type":null}`,
		"type number":       `{"type":5}`,
		"type object":       `{"type":{"a":1}}`,
		"type empty":        `{"type":""}`,
		"type punctuation":  `{"type":"!!!"}`,
		"type too long":     `{"type":"` + strings.Repeat("a", 200) + `"}`,
		"attempt string":    `{"type":"phase_start","attempt":"1"}`,
		"attempt bool":      `{"type":"phase_start","attempt":true}`,
		"seq string":        `{"type":"phase_start","seq":"1"}`,
		"cost string":       `{"type":"phase_passed","cost_usd":"0.5"}`,
		"total cost object": `{"type":"plan_completed","total_cost_usd":{}}`,
		"duration huge":     `{"type":"phase_passed","duration_ms":1e300}`,
		"attempt huge":      `{"type":"phase_start","attempt":99999999999}`,
		"error number":      `{"type":"phase_failed","error":1}`,
		"phase_id array":    `{"type":"phase_start","phase_id":["a"]}`,
		"trailing garbage":  `{"type":"plan_start"} x`,
		"two objects":       `{"type":"plan_start"}{"type":"plan_start"}`,
	}
	for name, line := range cases {
		if ev, err := ParseEvent([]byte(line)); err == nil {
			t.Errorf("%s: accepted as %+v", name, ev)
		}
	}
}

func TestParseEventErrorNamesField(t *testing.T) {
	_, err := ParseEvent([]byte(`{"type":"phase_start","attempt":"one"}`))
	if err == nil || err.Error() != "event: attempt: must be a number, got string" {
		t.Errorf("got %v", err)
	}
	_, err = ParseEvent([]byte(`{"seq":1}`))
	if err == nil || err.Error() != "event: type: missing" {
		t.Errorf("got %v", err)
	}
}

func TestParseEventTruncatesLongText(t *testing.T) {
	long := strings.Repeat("é", MaxTextBytes) // 2 bytes each
	line, _ := json.Marshal(map[string]any{"type": "phase_failed", "phase_id": "a", "error": long, "reason": "short"})
	ev, err := ParseEvent(line)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Error) > MaxTextBytes || !strings.HasSuffix(ev.Error, "…(truncated)") || !strings.HasPrefix(ev.Error, "éé") {
		t.Errorf("error not truncated cleanly: len %d suffix %q", len(ev.Error), ev.Error[len(ev.Error)-20:])
	}
	if !json.Valid([]byte(`"` + ev.Error + `"`)) {
		t.Error("truncation split a rune")
	}
	if ev.Reason != "short" {
		t.Errorf("reason %q", ev.Reason)
	}
}

func TestNormalizeEventType(t *testing.T) {
	cases := map[string]string{
		"PlanStart": "plan_start", "plan_start": "plan_start", "PhaseStart": "phase_start",
		"PhasePassed": "phase_passed", "PhaseFailed": "phase_failed", "PhaseSkipped": "phase_skipped",
		"PlanCompleted": "plan_completed", "PlanAborted": "plan_aborted", "planStart": "plan_start",
		"PLAN_START": "plan_start", "phase-start": "phase_start", " plan start ": "plan_start",
		"GateEntered": "gate_entered", "gate_timed_out": "gate_timed_out", "HTTPError": "http_error",
		"Phase2Start": "phase2_start", "plan__start_": "plan_start", "a.b": "a_b", "": "", "__": "",
		"CheckFailed": "check_failed", "AgentCrash": "agent_crash",
	}
	for in, want := range cases {
		if got := NormalizeEventType(in); got != want {
			t.Errorf("NormalizeEventType(%q) = %q, want %q", in, got, want)
		}
		if got := NormalizeEventType(want); got != want {
			t.Errorf("not idempotent on %q: %q", want, got)
		}
	}
}

func TestEventHelpers(t *testing.T) {
	ev := Event{Type: EventPhaseFailed, Error: "e", ErrorType: "et", Reason: "r", PlanName: "p", PhaseID: "i", TS: "ts"}
	ev.MapText(strings.ToUpper)
	if ev.Error != "E" || ev.ErrorType != "ET" || ev.Reason != "R" || ev.PlanName != "P" || ev.PhaseID != "I" {
		t.Errorf("MapText missed a field: %+v", ev)
	}
	if ev.TS != "ts" || ev.Type != EventPhaseFailed {
		t.Errorf("MapText touched a non-text field: %+v", ev)
	}
	for typ, want := range map[string]bool{EventPlanCompleted: true, EventPlanAborted: true, EventPlanStart: false, EventPhaseFailed: false, "gate_entered": false} {
		if (Event{Type: typ}).IsTerminal() != want {
			t.Errorf("IsTerminal(%s) != %v", typ, want)
		}
	}
	less := []struct {
		p, q Position
		want bool
	}{
		{Position{0, 0}, Position{0, 1}, true},
		{Position{0, 1}, Position{0, 0}, false},
		{Position{0, 5}, Position{0, 5}, false},
		{Position{0, 900}, Position{1, 0}, true},
		{Position{1, 0}, Position{0, 900}, false},
	}
	for _, c := range less {
		if c.p.Less(c.q) != c.want {
			t.Errorf("%v.Less(%v) != %v", c.p, c.q, c.want)
		}
	}
}

func TestEventJSONRoundTrip(t *testing.T) {
	ev, err := ParseEvent([]byte(`{"seq":3,"ts":"T","type":"phase_passed","phase_id":"a","attempt":1,"duration_ms":5,"cost_usd":0}`))
	if err != nil {
		t.Fatal(err)
	}
	ev.Pos = Position{Gen: 2, Offset: 77}
	b, _ := json.Marshal(ev)
	var back Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ev, back) {
		t.Errorf("round trip: %+v vs %+v", ev, back)
	}
}

func FuzzParseEvent(f *testing.F) {
	for _, ex := range []string{"A", "B"} {
		for _, casing := range []string{"pascal", "snake"} {
			b, err := readFileForFuzz("../testdata/examples/" + ex + "/events." + casing + ".jsonl")
			if err != nil {
				f.Fatal(err)
			}
			for _, l := range bytes.Split(b, []byte("\n")) {
				f.Add(l)
			}
		}
	}
	f.Add([]byte(`{"type":"phase_passed","cost_usd":null,"attempt":1.0}`))
	f.Add([]byte(`{"type":"x","seq":-1e18}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := ParseEvent(line)
		if err != nil {
			if ev != (Event{}) {
				t.Fatalf("error with non-zero event: %+v", ev)
			}
			return
		}
		if ev.Type == "" || NormalizeEventType(ev.Type) != ev.Type || len(ev.Type) > maxTypeLen {
			t.Fatalf("bad type %q", ev.Type)
		}
		for _, s := range []string{ev.Error, ev.ErrorType, ev.Reason, ev.PlanName, ev.PhaseID} {
			if len(s) > MaxTextBytes {
				t.Fatalf("text longer than %d: %d", MaxTextBytes, len(s))
			}
		}
		if ev.Pos != (Position{}) {
			t.Fatal("ParseEvent set Pos")
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("marshal parsed event: %v", err)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
	})
}

// The token usage a line reports is read with the event, in every place
// and name a conductor writes it; a count that is not a usable number is
// left out without failing the event.
func TestParseEventUsage(t *testing.T) {
	for name, c := range map[string]struct {
		line string
		want *Usage
	}{
		"none":           {`{"type":"phase_passed","phase_id":"a"}`, nil},
		"top level":      {`{"type":"phase_passed","input_tokens":1200,"output_tokens":340,"model":"m"}`, &Usage{Model: "m", InputTokens: 1200, OutputTokens: 340}},
		"canonical":      {`{"type":"phase_passed","tokens_in":7,"tokens_out":8}`, &Usage{InputTokens: 7, OutputTokens: 8}},
		"object":         {`{"type":"phase_passed","usage":{"input_tokens":5,"output_tokens":6},"model":"outer"}`, &Usage{Model: "outer", InputTokens: 5, OutputTokens: 6}},
		"object model":   {`{"type":"phase_passed","token_usage":{"input_tokens":5,"model":"inner"},"model":"outer"}`, &Usage{Model: "inner", InputTokens: 5}},
		"negative":       {`{"type":"phase_passed","input_tokens":-1}`, nil},
		"too large":      {`{"type":"phase_passed","input_tokens":1125899906842625}`, nil},
		"string count":   {`{"type":"phase_passed","input_tokens":"12"}`, nil},
		"model only":     {`{"type":"phase_passed","model":"m"}`, nil},
		"general path":   {`{"type":"phase_passed","err\u006fr":"x","input_tokens":3}`, &Usage{InputTokens: 3}},
		"bad model":      {`{"type":"phase_passed","input_tokens":3,"model":7}`, &Usage{InputTokens: 3}},
		"usage not obj":  {`{"type":"phase_passed","usage":3}`, nil},
		"top level wins": {`{"type":"phase_passed","input_tokens":10,"usage":{"input_tokens":99}}`, &Usage{InputTokens: 10}},
		"fraction":       {`{"type":"x","input_tokens":1.5}`, nil},
		"huge":           {`{"type":"x","input_tokens":1e300}`, nil},
		"nul in model":   {`{"type":"x","input_tokens":3,"model":"bad\u0000name"}`, &Usage{InputTokens: 3}},
		"long model":     {`{"type":"x","input_tokens":3,"model":"` + strings.Repeat("m", 65) + `"}`, &Usage{InputTokens: 3}},
		"cost only":      {`{"type":"phase_passed","cost_usd":0.1}`, nil},
		"word in text":   {`{"type":"x","note":"no tokens here, tokens_in"}`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			ev, err := ParseEvent([]byte(c.line))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ev.Usage, c.want) {
				t.Fatalf("Usage = %+v, want %+v", ev.Usage, c.want)
			}
		})
	}
}

// Whatever a line holds, a usage read from it has counts in range and a
// printable model name of bounded length.
func FuzzParseEventUsage(f *testing.F) {
	for _, s := range []string{
		`{"type":"phase_passed","input_tokens":1200,"output_tokens":340,"model":"sonnet"}`,
		`{"type":"x","usage":{"tokens_in":5,"tokens_out":6,"model":"m"}}`,
		`{"type":"x","token_usage":{"input_tokens":9223372036854775807}}`,
		`{"type":"x","input_tokens":1,"input_tokens":2}`,
		`{"type":"x","model":"\u00e9","tokens_out":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := ParseEvent(line)
		if err != nil || ev.Usage == nil {
			return
		}
		u := ev.Usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.InputTokens > MaxTokens || u.OutputTokens > MaxTokens {
			t.Fatalf("counts out of range: %+v", u)
		}
		if len(u.Model) > maxModelLen || !utf8.ValidString(u.Model) || strings.IndexFunc(u.Model, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			t.Fatalf("model %q", u.Model)
		}
	})
}
