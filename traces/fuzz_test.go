package traces

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"karvi-edda-temporal/mapping"
)

// FuzzPhaseSpans: any transcript makes spans without panicking; the same
// transcript makes the same spans; every span is in the task's trace and
// under the phase (or the phase under its attempt), with a unique id and
// an end not before its start; a secret placed anywhere leaves no trace
// once sealed.
func FuzzPhaseSpans(f *testing.F) {
	f.Add(bytes.Join(transcriptLines(), []byte("\n")), int64(5000), "phase_passed")
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"x"},{"type":"tool_use","id":"a"}]}}`), int64(0), "phase_failed")
	f.Add([]byte(`{"type":"user","timestamp":"1999-01-01T00:00:00Z"}`+"\n"+`{"type":"result","total_cost_usd":-1}`), int64(-5), "phase_skipped")
	const secret = "sk-ant-api03-Zx8Qm2Vb7Nc4Lk1Jh6Gf3Ds9Aa0Ww5Ee"
	f.Fuzz(func(t *testing.T, data []byte, durMS int64, typ string) {
		lines := bytes.Split(data, []byte("\n"))
		tr := ParseTranscript(lines)
		r := PhaseRun{ID: Identity{TaskID: "T1"}, Attempt: 1, Plan: "p", Transcript: &tr,
			End: mapping.Event{Pos: mapping.Position{Offset: 7}, TS: "2026-01-02T10:00:00Z", Type: typ, PhaseID: "impl",
				Attempt: 1, DurationMS: durMS, Error: "failed " + secret}}
		a := PhaseSpans(r)
		tr2 := ParseTranscript(lines)
		r.Transcript = &tr2
		if fmt.Sprint(a) != fmt.Sprint(PhaseSpans(r)) {
			t.Fatal("not deterministic")
		}
		phase := a[0].SpanID
		seen := map[string]bool{}
		for i, s := range a {
			if s.TraceID != r.ID.TraceID() {
				t.Fatalf("span %d in another trace", i)
			}
			if (i == 0 && s.Parent != r.ID.AttemptSpanID(1)) || (i > 0 && s.Parent != phase) {
				t.Fatalf("span %d (%s) has parent %s", i, s.Name, s.Parent)
			}
			if seen[s.SpanID.String()] {
				t.Fatalf("span id %s twice", s.SpanID)
			}
			seen[s.SpanID.String()] = true
			if s.End.Before(s.Start) {
				t.Fatalf("span %d ends before it starts", i)
			}
		}
		// With the secret in every text the transcript has, sealing masks it.
		withSecret := bytes.ReplaceAll(data, []byte("x"), []byte(" "+secret+" "))
		tr3 := ParseTranscript(bytes.Split(withSecret, []byte("\n")))
		r.Transcript = &tr3
		if out := fmt.Sprintf("%+v", Seal(PhaseSpans(r))); strings.Contains(out, secret) {
			t.Fatalf("a secret survived sealing: %s", out)
		}
	})
}
