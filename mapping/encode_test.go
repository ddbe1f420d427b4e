package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// refObj encodes an obj the way the reducer did before it had its own
// encoder: every value through json.Marshal, the result compacted by it.
func refObj(t testing.TB, o obj) []byte {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		buf.Write(k)
		buf.WriteByte(':')
		var v []byte
		var err error
		if inner, ok := f.v.(obj); ok {
			v = refObj(t, inner)
		} else if v, err = json.Marshal(f.v); err != nil {
			t.Fatalf("reference encoding of %v: %v", f.v, err)
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

var encodeStrings = []string{
	"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnl\ncr\rbs\bff\f",
	"\x00\x01\x1f\x7f", "caf\u00e9 \u65e5\u672c", "\u2028line\u2029para", "bad \xff\xfe utf8 \xe2\x82",
	"emoji \U0001F600", strings.Repeat("x", 300),
}

func TestEncoderMatchesEncodingJSON(t *testing.T) {
	for _, s := range encodeStrings {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("string %q: got %s want %s", s, got, want)
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.85 + 0.42 + 0.18, 1e-6, 9.99e-7, 1e-7,
		1.5e-10, 1e20, 1e21, 1.2345e22, -3e-9, math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789.125} {
		want, _ := json.Marshal(f)
		got, err := appendFloat(nil, f)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("float %v: got %s (%v) want %s", f, got, err, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := appendFloat(nil, f); err == nil {
			t.Errorf("float %v encoded without error", f)
		}
	}
	entries := []LogEntry{{Time: "2026-02-28T03:00:00.123456789Z", Agent: "conductor", Action: "phase_start", Detail: "<x> & \"y\""}}
	o := obj{
		{"s", "a<b"}, {"i", 42}, {"i64", int64(-1 << 62)}, {"f", 0.85}, {"b", true}, {"n", nil},
		{"nested", obj{{"deeper", obj{{"x", 1.5e-9}}}, {"empty", obj{}}}},
		{"strs", []string{"a", "\u2028"}}, {"nilstrs", []string(nil)}, {"nostrs", []string{}},
		{"log", entries}, {"nolog", []LogEntry{}}, {"nillog", []LogEntry(nil)}, {"entry", entries[0]},
		{"other", map[string]int{"z": 1, "a": 2}},
	}
	if got, want := o.bytes(), refObj(t, o); !bytes.Equal(got, want) {
		t.Errorf("obj:\n got %s\nwant %s", got, want)
	}
	if got, err := json.Marshal(o); err != nil || !bytes.Equal(got, o.bytes()) {
		t.Errorf("json.Marshal(obj) = %s, %v", got, err)
	}
	if got := (obj{{"bad", math.NaN()}}).bytes(); string(got) != "{}" {
		t.Errorf("unencodable body gave %s, want {}", got)
	}
}

// The encoder's log cache must follow the log whoever changes it, and an
// encoder that kept its cache must write the same bytes as a new one.
func TestPatchLogFollowsChangedLog(t *testing.T) {
	s := threePhaseState()
	var enc BriefEncoder
	step := func(st *BriefState, e *BriefEncoder, ev Event) Patch {
		c, ok := st.Reduce(ev)
		if !ok {
			t.Fatalf("event at %v reduced to nothing", ev.Pos)
		}
		return e.Patch(st, c)
	}
	step(&s, &enc, at(1, `{"type":"tick","ts":"t1"}`))
	step(&s, &enc, at(2, `{"type":"tick","ts":"t2"}`))
	s.Brief.Log[0].Detail = "edited <by> hand"
	s.Brief.Log = append(s.Brief.Log, LogEntry{Time: "t2.5", Action: "manual"})
	p := step(&s, &enc, at(3, `{"type":"tick","ts":"t3"}`))
	var got struct{ Log []LogEntry }
	if err := json.Unmarshal(p.Body, &got); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(s.Brief.Log)
	have, _ := json.Marshal(got.Log)
	if !bytes.Equal(want, have) || len(got.Log) != 4 || got.Log[0].Detail != "edited <by> hand" {
		t.Errorf("patch log %s\nstate log %s", have, want)
	}

	// A state decoded from history, with a new encoder, gives the same
	// bodies, also once the log is full and drops entries at its front.
	s.LogLimit = 5
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back BriefState
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	var fresh BriefEncoder
	for i := int64(4); i < 12; i++ {
		ev := at(i, fmt.Sprintf(`{"type":"tick","ts":"t%d"}`, i))
		p1, p2 := step(&s, &enc, ev), step(&back, &fresh, ev)
		if !bytes.Equal(p1.Body, p2.Body) {
			t.Fatalf("event %d: decoded state patch differs:\n%s\n%s", i, p1.Body, p2.Body)
		}
		var once BriefEncoder
		if p3 := once.Patch(&s, Change{Type: ev.Type, Fields: ChangedLog}); !bytes.Equal(p1.Body, p3.Body) {
			t.Fatalf("event %d: cached log differs from a fresh encoding:\n%s\n%s", i, p1.Body, p3.Body)
		}
	}
	if len(s.Brief.Log) != 5 {
		t.Errorf("log has %d entries, want the limit 5", len(s.Brief.Log))
	}
}

func FuzzEncoderMatchesEncodingJSON(f *testing.F) {
	for _, s := range encodeStrings {
		f.Add(s, 0.85)
	}
	f.Add("x", 1e-7)
	f.Add("y", 1e21)
	f.Fuzz(func(t *testing.T, s string, x float64) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("string %q: got %s want %s", s, got, want)
		}
		want, werr := json.Marshal(x)
		got, err := appendFloat(nil, x)
		if (werr == nil) != (err == nil) || (err == nil && !bytes.Equal(got, want)) {
			t.Fatalf("float %v: got %s (%v) want %s (%v)", x, got, err, want, werr)
		}
		e := LogEntry{Time: s, Agent: "conductor", Action: s, Detail: s}
		want, _ = json.Marshal(e)
		if got := e.appendTo(nil); !bytes.Equal(got, want) {
			t.Fatalf("entry: got %s want %s", got, want)
		}
	})
}
