package jobview

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseState(t *testing.T) {
	s, err := ParseState([]byte(`{"plan_status":"Blocked","phases":[{"id":"test","status":"FAILED","attempts":3,
		"checks":[{"check_type":"cmd_succeeds","status":"failed","detail":"` + strings.Repeat("d", 2000) + `","duration_ms":-5}],
		"error":{"error_type":"check_failed"}}],"version":14}`))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Phases[0]
	if s.PlanStatus != "blocked" || p.Status != "failed" || p.Attempts != 3 || p.Checks[0].DurationMS != 0 ||
		len(*p.Checks[0].Detail) > MaxOutputBytes {
		t.Errorf("%+v", s)
	}
	for _, bad := range []string{``, `[]`, `{"phases":"x"}`, `{"phases":[{"attempts":"3"}]}`, `{"plan_status":`} {
		if _, err := ParseState([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"plan_status":"running","phases":[{"id":"test","status":"checking","attempts":2,"checks":[{"check_type":"cmd_succeeds","status":"running","duration_ms":1}]}]}`))
	f.Add([]byte(`{"phases":[{"id":"a","status":"failed","attempts":1,"checks":[{"check_type":"x","status":"failed","detail":null}]}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseState(data)
		if err != nil {
			return
		}
		if len(s.Phases) > maxStatePhases {
			t.Fatalf("%d phases", len(s.Phases))
		}
		// Whatever it says, a tally takes it without growing past its bounds.
		tl := NewTally(Seed{PhaseIDs: []string{"a", "test"}})
		tl.Current = "test"
		tl.ObserveState(s)
		for _, p := range s.Phases {
			if len(p.Checks) > maxStateChecks || len(p.ID) > maxIDLen+len("…") {
				t.Fatalf("phase %q with %d checks", p.ID, len(p.Checks))
			}
			for _, c := range p.Checks {
				if c.DurationMS < 0 || c.Detail != nil && len(*c.Detail) > MaxOutputBytes {
					t.Fatalf("check %+v", c)
				}
			}
		}
		tl.Verdict(false)
	})
}

// Any RunState or AttemptResult that decodes encodes, and decodes back to
// itself.
func FuzzTaggedRoundTrip(f *testing.F) {
	for _, s := range []string{
		`{"status":"executing","attempt":1,"step":"test"}`,
		`{"status":"failed","attempts":2,"last_error":"x"}`,
		`{"status":"verification_failed","verdict":{"passed":false,"test_results":[],"logs":[],"artifacts":[]}}`,
		`{"status":"execution_failed","step":"","error":""}`,
		`{"status":"succeeded","attempt":1,"diff_path":"a"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s RunState
		if json.Unmarshal(data, &s) == nil {
			out, err := json.Marshal(s)
			if err != nil {
				t.Fatalf("decoded %+v but cannot encode it: %v", s, err)
			}
			var back RunState
			if err := json.Unmarshal(out, &back); err != nil || back != s {
				t.Fatalf("%s came back as %+v (%v)", out, back, err)
			}
		}
		var r AttemptResult
		if json.Unmarshal(data, &r) == nil {
			out, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("decoded %+v but cannot encode it: %v", r, err)
			}
			var back AttemptResult
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("%s does not decode: %v", out, err)
			}
			again, _ := json.Marshal(back)
			if string(again) != string(out) {
				t.Fatalf("%s came back as %s", out, again)
			}
		}
	})
}
