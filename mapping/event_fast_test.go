package mapping

import (
	"bytes"
	"reflect"
	"strconv"
	"testing"
)

// ParseEvent's fast path must give exactly what the general decoder gives:
// the same event, or the same error.
func checkParseMatchesMap(t *testing.T, line []byte) {
	t.Helper()
	got, gotErr := ParseEvent(line)
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return // decided before either decoder runs
	}
	want, wantErr := parseEventMap(trimmed)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%q: error %v, general decoder %v", line, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n fast    %+v\n general %+v", line, got, want)
	}
}

var parseCases = []string{
	`{"seq":0,"ts":"2026-02-28T03:00:00.123456789Z","type":"plan_start","plan_name":"karvi-t5","phase_count":3}`,
	`{"type":"PhasePassed","phase_id":"a","attempt":1.0,"duration_ms":5,"cost_usd":0.85}`,
	`  {"type":"x","seq":-1e18}  `,
	`{}`, `{ }`, `{"type":null}`, `{"type":1}`, `{"type":"__"}`, `{"type":"a__b_"}`, `{"type":"Ünïcode"}`,
	`{"type":"x","type":"y"}`, `{"type":"x","seq":"1","seq":2}`, `{"type":"x","seq":2,"seq":"1"}`,
	`{"typ\u0065":"esc key"}`, `{"type":"esc \"value\" \u00e9"}`, `{"type":"bad","error":"\xff"}`,
	`{"type":"x","extra":{"nested":[1,{"a":"}"}],"s":"]"},"phase_id":"p"}`,
	`{"type":"x","cost_usd":1e400}`, `{"type":"x","attempt":3000000000}`, `{"type":"x","n":[1,2,]}`,
	`{"type":"x",}`, `{"type":"x"} trailing`, `{"type" : "spaced" , "seq" : 7 }`, "{\"type\":\"x\"\t,\n\"seq\":1}",
	`{"type":"x","ts":"` + string(bytes.Repeat([]byte("t"), 100)) + `"}`,
}

func TestParseEventFastMatchesGeneral(t *testing.T) {
	for _, c := range parseCases {
		checkParseMatchesMap(t, []byte(c))
	}
}

func FuzzParseEventFastMatchesGeneral(f *testing.F) {
	for _, c := range parseCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkParseMatchesMap(t, line)
	})
}

// smallInt must read exactly what the general number path reads.
func FuzzSmallInt(f *testing.F) {
	for _, s := range []string{"0", "-0", "7", "-12", "119000", "999999999999999999", "1000000000000000000", "1.0", "1e3", "", "-", "x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := smallInt(b)
		if !ok {
			return
		}
		want, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || want != n {
			t.Fatalf("smallInt(%q) = %d, ParseInt = %d, %v", b, n, want, err)
		}
	})
}
