package jobview

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestParseUsage(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Usage
		ok   bool
	}{
		{`{"type":"phase_passed","input_tokens":1200,"output_tokens":340,"model":"sonnet"}`, Usage{"sonnet", 1200, 340}, true},
		{`{"type":"phase_passed","tokens_in":7,"tokens_out":8}`, Usage{"", 7, 8}, true},
		{`{"type":"phase_passed","usage":{"input_tokens":5,"output_tokens":6},"model":"opus"}`, Usage{"opus", 5, 6}, true},
		{`{"type":"phase_passed","token_usage":{"tokens_in":1,"model":"haiku"}}`, Usage{"haiku", 1, 0}, true},
		{`{"type":"phase_passed","input_tokens":10,"usage":{"input_tokens":99}}`, Usage{"", 10, 0}, true},
		// Counts that are not non-negative integers are ignored.
		{`{"type":"x","input_tokens":-1,"output_tokens":"12"}`, Usage{}, false},
		{`{"type":"x","input_tokens":1.5}`, Usage{}, false},
		{`{"type":"x","input_tokens":1e300}`, Usage{}, false},
		{`{"type":"x","input_tokens":3,"model":"bad\u0000name"}`, Usage{"", 3, 0}, true},
		{`{"type":"x","input_tokens":3,"model":"` + strings.Repeat("m", 65) + `"}`, Usage{"", 3, 0}, true},
		{`{"type":"phase_passed","cost_usd":0.1}`, Usage{}, false},
		{`{"type":"x","note":"no tokens here, tokens_in"}`, Usage{}, false},
		{`not json tokens`, Usage{}, false},
	} {
		got, ok := ParseUsage([]byte(tc.line))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %+v %v, want %+v %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

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

func FuzzParseUsage(f *testing.F) {
	for _, s := range []string{
		`{"type":"phase_passed","input_tokens":1200,"output_tokens":340,"model":"sonnet"}`,
		`{"usage":{"tokens_in":5,"tokens_out":6,"model":"m"}}`,
		`{"token_usage":{"input_tokens":9223372036854775807}}`,
		`{"input_tokens":1,"input_tokens":2}`,
		`tokens`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		u, ok := ParseUsage(line)
		if !ok {
			if u != (Usage{}) {
				t.Fatalf("no usage, yet %+v", u)
			}
			return
		}
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.InputTokens > maxTokens || u.OutputTokens > maxTokens {
			t.Fatalf("counts out of range: %+v", u)
		}
		if len(u.Model) > maxModelLen || !utf8.ValidString(u.Model) || strings.IndexFunc(u.Model, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			t.Fatalf("model %q", u.Model)
		}
	})
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
