package canonical

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The schema's sample events parse and validate as written, with no
// warning and no change.
func TestSamples(t *testing.T) {
	files, err := filepath.Glob("testdata/samples/*.json")
	if err != nil || len(files) < 6 {
		t.Fatalf("samples: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got, warns, err := Validate(ev)
		if err != nil || len(warns) != 0 {
			t.Errorf("%s: %v %v", f, warns, err)
		}
		if got.TS != ev.TS || got.Type != ev.Type || !bytes.Equal(got.Payload, ev.Payload) {
			t.Errorf("%s: changed by validation", f)
		}
		// Nothing in the samples is a secret.
		if r := Redact(got); !sameEvent(r, got) {
			t.Errorf("%s: redaction changed a clean sample: %+v", f, r)
		}
	}
}

func TestSampleMetricsNullable(t *testing.T) {
	ev, err := Parse([]byte(`{"ts":"2026-02-17T22:30:02Z","run_id":"run-1","provider":"codex","agent_id":"a",
		"role":"executor","state":"running","type":"tool_result",
		"metrics":{"latency_ms":12.5,"tokens_in":null,"tokens_out":null,"cost_usd":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Validate(ev)
	if err != nil || got.Metrics == nil || *got.Metrics.LatencyMS != 12.5 || got.Metrics.TokensIn != nil {
		t.Fatalf("%+v %v", got.Metrics, err)
	}
	out, _ := json.Marshal(got.Metrics)
	if string(out) != `{"latency_ms":12.5,"tokens_in":null,"tokens_out":null,"cost_usd":null}` {
		t.Errorf("metrics encode as %s", out)
	}
	if _, err := Parse([]byte(`{"metrics":{"tokens_in":"many"}}`)); err == nil {
		t.Error("a string token count parsed")
	}
}

func TestRedactEveryString(t *testing.T) {
	secret := "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
	ev := base()
	ev.RawRef = "file:///tmp/x?token=" + secret
	ev.IntentRef = "plan-" + secret
	ev.Payload = json.RawMessage(`{"message":"used ` + secret + `","nested":{"a":{"api_key":"hunter2"}},"ok":"fine"}`)
	got := Redact(ev)
	all, _ := json.Marshal(got)
	if strings.Contains(string(all), "abcdefghijklmnop") || strings.Contains(string(all), "hunter2") {
		t.Errorf("secret survived: %s", all)
	}
	if !strings.Contains(string(all), `"ok":"fine"`) || !strings.Contains(string(all), "***REDACTED***") {
		t.Errorf("redacted too much or nothing: %s", all)
	}
	if !strings.Contains(string(ev.Payload), "hunter2") {
		t.Error("Redact changed its input")
	}
}

// sameEvent compares events with payloads compared as JSON values, since
// re-encoding may change their spacing.
func sameEvent(a, b Event) bool {
	pa, pb := a.Payload, b.Payload
	a.Payload, b.Payload = nil, nil
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		return false
	}
	if len(pa) == 0 || len(pb) == 0 {
		return len(pa) == len(pb)
	}
	var va, vb any
	if json.Unmarshal(pa, &va) != nil || json.Unmarshal(pb, &vb) != nil {
		return false
	}
	ja, _ = json.Marshal(va)
	jb, _ = json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
