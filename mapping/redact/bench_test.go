package redact

import "testing"

// Typical lines: what the conductor writes and what agents print.
var benchLines = []string{
	`{"seq":3,"ts":"2026-02-17T22:27:00Z","type":"phase_start","phase_id":"build","attempt":1}`,
	`{"seq":4,"ts":"2026-02-17T22:28:12Z","type":"phase_passed","phase_id":"build","attempt":1,"duration_ms":72000,"cost_usd":0.0123}`,
	`{"seq":5,"ts":"2026-02-17T22:29:40Z","type":"phase_failed","phase_id":"test","attempt":2,"duration_ms":88000,"error":"cmd_succeeds failed: cargo test exited 101"}`,
	`Running migrations in src/db/migrations (3 pending) at 2026-02-17T22:27:00.123Z`,
}

func BenchmarkString(b *testing.B) {
	n := 0
	for _, l := range benchLines {
		n += len(l)
	}
	b.SetBytes(int64(n / len(benchLines)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = String(benchLines[i%len(benchLines)])
	}
}

func BenchmarkStringWithSecret(b *testing.B) {
	line := `{"type":"tool_call","payload":{"tool_name":"bash","args":{"cmd":"curl -H 'Authorization: Bearer abc123' https://api"}}}`
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		_ = String(line)
	}
}

func BenchmarkJSON(b *testing.B) {
	lines := make([][]byte, 3)
	for i := range lines {
		lines[i] = []byte(benchLines[i])
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = JSON(lines[i%len(lines)])
	}
}

func BenchmarkValue(b *testing.B) {
	v := map[string]any{
		"seq": 5.0, "ts": "2026-02-17T22:29:40Z", "type": "phase_failed", "phase_id": "test",
		"attempt": 2.0, "duration_ms": 88000.0, "error": "cmd_succeeds failed: cargo test exited 101",
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Value(v)
	}
}
