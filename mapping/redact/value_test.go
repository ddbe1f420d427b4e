package redact

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := decode([]byte(s), &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func TestValueSensitiveKeysAndStrings(t *testing.T) {
	in := mustDecode(t, `{
		"ts": "2026-02-17T22:27:00Z",
		"type": "tool_call",
		"payload": {
			"tool_name": "bash",
			"args": {"cmd": "curl -H 'Authorization: Bearer abc123' https://x", "env": {"OPENAI_API_KEY": "sk-anything", "HOME": "/root"}},
			"credentials": {"user": "u", "pass": "p"},
			"api_keys": ["a", "b"],
			"password": 1234,
			"password_set": true,
			"token": null,
			"secret": "",
			"files_changed": ["src/db/migrations/001.sql", "`+awsKeyID+`"]
		},
		"metrics": {"tokens_in": 210, "tokens_out": 95, "cost_usd": 0.0021},
		"token_usage": {"input_tokens": 10, "output_tokens": 20}
	}`)
	want := mustDecode(t, `{
		"ts": "2026-02-17T22:27:00Z",
		"type": "tool_call",
		"payload": {
			"tool_name": "bash",
			"args": {"cmd": "curl -H 'Authorization: Bearer `+Mask+`' https://x", "env": {"OPENAI_API_KEY": "`+Mask+`", "HOME": "/root"}},
			"credentials": "`+Mask+`",
			"api_keys": "`+Mask+`",
			"password": "`+Mask+`",
			"password_set": true,
			"token": null,
			"secret": "",
			"files_changed": ["src/db/migrations/001.sql", "`+Mask+`"]
		},
		"metrics": {"tokens_in": 210, "tokens_out": 95, "cost_usd": 0.0021},
		"token_usage": {"input_tokens": 10, "output_tokens": 20}
	}`)
	got := Value(in)
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		t.Fatalf("Value mismatch:\n%s", g)
	}
}

func TestValueDoesNotModifyInput(t *testing.T) {
	in := mustDecode(t, `{"a": {"password": "x"}, "l": ["token=abc123"]}`)
	before, _ := json.Marshal(in)
	_ = Value(in)
	after, _ := json.Marshal(in)
	if !bytes.Equal(before, after) {
		t.Fatalf("input changed: %s -> %s", before, after)
	}
}

func TestValueSharesUnchangedContainers(t *testing.T) {
	clean := map[string]any{"a": []any{"x", "y"}, "b": map[string]any{"c": "d"}}
	got := Value(clean).(map[string]any)
	if reflect.ValueOf(got).Pointer() != reflect.ValueOf(clean).Pointer() {
		t.Fatal("clean map was copied")
	}
	event := map[string]any{"ts": "2026-02-17T22:27:00Z", "type": "phase_failed", "error": "cargo test exited 101", "n": 1.0}
	if allocs := testing.AllocsPerRun(100, func() { _ = Value(event) }); allocs != 0 {
		t.Fatalf("Value on a clean event allocated %v times, want 0", allocs)
	}
}

// nest wraps leaf in n levels of objects: nest(1, v) = {"k": v}.
func nest(n int, leaf any) any {
	v := leaf
	for i := 0; i < n; i++ {
		v = map[string]any{"k": v}
	}
	return v
}

func innermost(v any, levels int) any {
	for i := 0; i < levels; i++ {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		v = m["k"]
	}
	return v
}

func TestValueDepthLimit(t *testing.T) {
	const secret = "token=abc123"
	const masked = "token=" + Mask
	// Ten levels: everything is still inspected, so the leaf is redacted
	// normally and ordinary text survives.
	got := Value(nest(MaxDepth, []any{"plain", secret}))
	// The array is level 11 here: masked whole.
	if leaf := innermost(got, MaxDepth); leaf != Mask {
		t.Fatalf("array at level 11: got %#v, want Mask", leaf)
	}
	got = Value(nest(MaxDepth, secret))
	if leaf := innermost(got, MaxDepth); leaf != masked {
		t.Fatalf("string inside level 10: got %#v, want %q", leaf, masked)
	}
	got = Value(nest(MaxDepth, "plain text"))
	if leaf := innermost(got, MaxDepth); leaf != "plain text" {
		t.Fatalf("plain string inside level 10: got %#v", leaf)
	}
	// Eleven levels: the eleventh object is masked whole, even if it looks
	// harmless, because it was not inspected.
	got = Value(nest(MaxDepth+1, "plain text"))
	if leaf := innermost(got, MaxDepth); leaf != Mask {
		t.Fatalf("object at level 11: got %#v, want Mask", leaf)
	}
	got = Value(nest(MaxDepth+5, "plain text"))
	if leaf := innermost(got, MaxDepth); leaf != Mask {
		t.Fatalf("object at level 11 of 15: got %#v, want Mask", leaf)
	}
	// Arrays count as levels too.
	var arr any = "plain"
	for i := 0; i < MaxDepth+1; i++ {
		arr = []any{arr}
	}
	got = Value(arr)
	for i := 0; i < MaxDepth; i++ {
		got = got.([]any)[0]
	}
	if got != Mask {
		t.Fatalf("array at level 11: got %#v", got)
	}
}

func TestValueSecretKeyIsRenamed(t *testing.T) {
	in := map[string]any{awsKeyID: "x", "AKIAABCDEFGHIJKLMNOP": "y", "ok": "z"}
	got := Value(in).(map[string]any)
	want := map[string]any{Mask: "y", Mask + "#2": "x", "ok": "z"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func TestValueOtherTypes(t *testing.T) {
	type event struct {
		Type   string            `json:"type"`
		Env    map[string]string `json:"env"`
		Tokens int               `json:"tokens_in"`
	}
	got := Value(event{Type: "x", Env: map[string]string{"GITHUB_TOKEN": "abc"}, Tokens: 3})
	want := map[string]any{"type": "x", "env": map[string]any{"GITHUB_TOKEN": Mask}, "tokens_in": json.Number("3")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("struct: got %#v", got)
	}
	clean := event{Type: "x"}
	if got := Value(clean); !reflect.DeepEqual(got, clean) {
		t.Fatalf("clean struct should be returned as is, got %#v", got)
	}
	if got := Value(func() {}); got != Mask {
		t.Fatalf("unmarshalable value: got %#v want Mask", got)
	}
	if got := Value([]string{"a", "password=x1"}); !reflect.DeepEqual(got, []any{"a", "password=" + Mask}) {
		t.Fatalf("[]string: got %#v", got)
	}
	if got := Value(42.0); got != 42.0 {
		t.Fatalf("number: %#v", got)
	}
}

func TestJSON(t *testing.T) {
	clean := []byte(`{"seq":1, "ts":"2026-02-17T22:27:00Z","type":"phase_start","phase_id":"build","n":12345678901234567890}`)
	if got := JSON(clean); &got[0] != &clean[0] {
		t.Fatalf("clean JSON should be returned as is")
	}
	in := []byte(`{"type":"tool_call","payload":{"args":{"env":{"API_KEY":"abc"},"html":"<a&b>"}},"big":12345678901234567890}`)
	want := `{"big":12345678901234567890,"payload":{"args":{"env":{"API_KEY":"` + Mask + `"},"html":"<a&b>"}},"type":"tool_call"}`
	if got := string(JSON(in)); got != want {
		t.Fatalf("JSON:\n got %s\nwant %s", got, want)
	}
	// Escaped content is decoded before scanning.
	in = []byte(`{"msg":"key \u0073k-proj-Xq3vB8nL2mK9pR4tY7wZ1aC5dF6gH0jE"}`)
	if got := string(JSON(in)); got != `{"msg":"key `+Mask+`"}` {
		t.Fatalf("escaped: %s", got)
	}
	// Not JSON: free text rules.
	in = []byte(`{"password": "hunter2", truncated`)
	if got := string(JSON(in)); got != `{"password": "`+Mask+`", truncated` {
		t.Fatalf("invalid JSON: %s", got)
	}
	in = []byte(`not json password=x1`)
	if got := string(JSON(in)); got != `not json password=`+Mask {
		t.Fatalf("text: %s", got)
	}
	// Deep nesting is caught even when nothing looks secret.
	deep, _ := json.Marshal(nest(MaxDepth+1, "plain"))
	if got := string(JSON(deep)); bytes.Contains([]byte(got), []byte("plain")) {
		t.Fatalf("deep content survived: %s", got)
	}
	// Keys written with odd spacing and characters still count.
	in = []byte("{\"password!\"\n : \"x\"}")
	if got := string(JSON(in)); got != `{"password!":"`+Mask+`"}` {
		t.Fatalf("odd key: %s", got)
	}
}

// slowJSON is JSON without the raw-text shortcut.
func slowJSON(r *Redactor, data []byte) []byte {
	var v any
	if err := decode(data, &v); err != nil {
		return []byte(r.String(string(data)))
	}
	nv, changed := r.value(v, 0)
	if !changed {
		return data
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(nv)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// FuzzJSON checks that the raw-text shortcut never hides what decoding
// would have masked, with and without an allow list.
func FuzzJSON(f *testing.F) {
	for _, s := range cleanCorpus {
		f.Add([]byte(s), "")
	}
	f.Add([]byte(`{"password" : "x"}`), "x")
	f.Add([]byte(`{"a":[{"token":true},{"k":"AKIAIOSFODNN7EXAMPLE"}]}`), "AKIAIOSFODNN7EXAMPLE")
	f.Add([]byte(`["x",{"y":{"z":{"w":{"v":{"u":{"t":{"s":{"r":{"q":{"p":1}}}}}}}}}}]`), "")
	f.Add([]byte(`{"a":"token='abc","b":"c'"}`), "abc")
	f.Fuzz(func(t *testing.T, data []byte, allow string) {
		for _, r := range []*Redactor{&std, New(allow)} {
			fast := r.JSON(data)
			slow := slowJSON(r, data)
			if !bytes.Equal(fast, slow) {
				t.Fatalf("shortcut differs for %q (allow %q):\nfast %q\nslow %q", data, allow, fast, slow)
			}
		}
	})
}
