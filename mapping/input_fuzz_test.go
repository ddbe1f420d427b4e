package mapping

// Fuzz targets for the inputs the bridge takes from outside that the other
// targets do not cover: karvi's DispatchPlan, the conductor's state.json,
// and a conductor line on the worker's path (redacted raw, parsed, redacted
// per field, reduced). `make fuzz` runs every Fuzz* here for FUZZTIME.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"karvi-edda-temporal/mapping/redact"
)

func FuzzParseDispatchPlan(f *testing.F) {
	for _, p := range []string{"../testdata/examples/A/dispatch.json", "../testdata/examples/B/dispatch.json", "../testdata/dispatch/full.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"taskId":"../x","message":"m"}`))
	f.Add([]byte(`{"taskId":"T1","message":"m","timeoutSec":1e400,"controlsSnapshot":{"max_review_attempts":0}}`))
	f.Add([]byte(`{"taskId":"T1","message":"m","artifacts":[{"id":""}],"steps":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDispatchPlan(data)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || err.Error() == "" {
				t.Fatalf("error is not a *FieldError with a message: %T %v", err, err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("parsed plan does not validate: %v", err)
		}
		if !taskIDPattern.MatchString(d.TaskID) {
			t.Fatalf("unsafe taskId accepted: %q", d.TaskID)
		}
		if n := d.EffectiveTimeoutSec(); n <= 0 || n > MaxTimeoutSec {
			t.Fatalf("effective timeout %d", n)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if _, err := ParseDispatchPlan(b); err != nil {
			t.Fatalf("a parsed plan does not parse again: %v\n%s", err, b)
		}
	})
}

func FuzzParseConductorState(f *testing.F) {
	b, err := os.ReadFile("../testdata/examples/B/state.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"plan_status":"Running","phases":[{"id":"a","status":"Stale"}]}`))
	f.Add([]byte(`{"plan_status":"blocked","total_cost_usd":9,"phases":[{"id":"a","status":"failed","error":{"error_type":"BudgetExceeded","message":"x"}}]}`))
	f.Add([]byte(`{"plan_status":"aborted","phases":null}`))
	budget := 1.0
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := ParseConductorState(data)
		if err != nil {
			return
		}
		if cs.PlanStatus == "" || string(cs.PlanStatus) != strings.ToLower(string(cs.PlanStatus)) {
			t.Fatalf("plan status %q", cs.PlanStatus)
		}
		st := NewBriefState("T1", PlanSummary{Name: "karvi-t1", PhaseIDs: []string{"a", "b"}})
		for _, bud := range []*float64{nil, &budget} {
			o := OutcomeFromState(cs, st, bud)
			switch o.TaskStatus {
			case "completed", "blocked":
			default:
				t.Fatalf("a finished conductor mapped to task status %q (%+v)", o.TaskStatus, o)
			}
			if o.TaskStatus == "blocked" && o.LastError == "" {
				t.Fatalf("blocked without lastError: %+v", o)
			}
		}
	})
}

// FuzzConductorLine runs a line the way TailEvents does (activities.collect:
// redact.JSON on the raw line, ParseEvent, MapText(redact.String)) and then
// the reducer. Whatever the line, nothing panics, every text the brief gets
// is valid UTF-8, and the brief always marshals.
func FuzzConductorLine(f *testing.F) {
	for _, ex := range []string{"A", "B"} {
		b, err := os.ReadFile("../testdata/examples/" + ex + "/events.snake.jsonl")
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"phase_failed","phase_id":"test","error":"password=hunter22 sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"}`))
	f.Add([]byte(`{"type":"0123456789abcdef0123456789abcdef01234567","ts":"ghp_0123456789abcdefghijABCDEFGHIJ012345"}`))
	f.Add([]byte(`{"type":"phase_skipped","phase_id":"docs","reason":"\u0073k-ant-api03-abcdefghijklmnopqrstuvwxyz0123"}`))
	f.Add([]byte("{\"type\":\"gate_entered\",\"phase_id\":\"te\xffst\",\"reason\":\"caf\xe9\"}"))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := ParseEvent(redact.JSON(line))
		if err != nil {
			return
		}
		ev.MapText(redact.String)
		st := NewBriefState("T1", PlanSummary{Name: "karvi-t1", PhaseIDs: []string{"implement", "test", "docs"}})
		ev.Pos = Position{Offset: 1}
		p, ok := apply(&st, ev)
		if ok && !json.Valid(p.Body) {
			t.Fatalf("patch body is not JSON: %s", p.Body)
		}
		for _, s := range []string{ev.Error, ev.Reason, ev.PhaseID, ev.PlanName, ev.ErrorType} {
			if !utf8.ValidString(s) {
				t.Fatalf("invalid UTF-8 reached the brief: %q", s)
			}
		}
		if _, err := json.Marshal(st.Brief); err != nil {
			t.Fatalf("brief does not marshal: %v", err)
		}
	})
}
