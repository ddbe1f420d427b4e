package canonical

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzValidate: Validate never panics, and an event it accepts comes back
// unchanged and without warnings when validated again, also after a trip
// through JSON.
func FuzzValidate(f *testing.F) {
	files, _ := filepath.Glob("testdata/samples/*.json")
	golden, _ := filepath.Glob("testdata/golden/*.jsonl")
	for _, p := range append(files, golden...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"ts":"2026-02-18T07:27:00.123456+09:00","run_id":"run-x","provider":"unknown","mode":"zen","agent_id":"a","role":"boss","state":"sleepy","type":"boom","payload":null,"metrics":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := Parse(data)
		if err != nil {
			return
		}
		got, _, err := Validate(ev)
		if err != nil {
			return
		}
		again, warns, err := Validate(got)
		if err != nil || len(warns) != 0 || !sameEvent(again, got) {
			t.Fatalf("re-validation: %+v -> %+v, %v, %v", got, again, warns, err)
		}
		line, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("accepted event does not encode: %v", err)
		}
		back, err := Parse(line)
		if err != nil {
			t.Fatalf("encoded event does not parse: %v\n%s", err, line)
		}
		trip, warns, err := Validate(back)
		if err != nil || len(warns) != 0 || !sameEvent(trip, got) {
			t.Fatalf("round trip: %s -> %+v, %v, %v", line, trip, warns, err)
		}
		_ = Redact(got)
	})
}
