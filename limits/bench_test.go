package limits

import "testing"

// One benchmark per input type. The common case is a line or a text with no
// limit in it: that is what every transcript line and phase error costs.
func benchLine(b *testing.B, line string) {
	p := []byte(line)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Default().Line(p, now)
	}
}

func benchText(b *testing.B, s string) {
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Default().Text(s, now)
	}
}

func BenchmarkLineAssistant(b *testing.B) {
	benchLine(b, `{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"I will run the tests now and then fix the failing rate limiter."}]},"session_id":"s1"}`)
}

func BenchmarkLineRateLimitEvent(b *testing.B) {
	benchLine(b, `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1773158400,"rateLimitType":"five_hour"}}`)
}

func BenchmarkLineResult429(b *testing.B) {
	benchLine(b, `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"You've hit your limit · resets 3:30am (Europe/Moscow)","total_cost_usd":0}`)
}

func BenchmarkLineResultSuccess(b *testing.B) {
	benchLine(b, `{"type":"result","subtype":"success","is_error":false,"duration_ms":61234,"result":"All 42 tests pass; the limiter now returns 429 with Retry-After.","total_cost_usd":0.4213,"usage":{"input_tokens":1200,"output_tokens":800}}`)
}

func BenchmarkLineCodexError(b *testing.B) {
	benchLine(b, `{"type":"error","message":"You've hit your usage limit. Upgrade to Pro or try again at 3:42 PM."}`)
}

func BenchmarkTextPhaseFailed(b *testing.B) {
	benchText(b, "check failed: cmd_succeeds: exit 1: --- FAIL: TestRateLimit (0.00s)\n    rl_test.go:12: expected rate limit 10 got 5\nFAIL\tgithub.com/acme/api/ratelimit\t0.012s")
}

func BenchmarkTextClaudeLimit(b *testing.B) {
	benchText(b, "You've hit your limit · resets Jan 18, 11:30am (Asia/Calcutta)")
}

func BenchmarkTextGeneric(b *testing.B) {
	benchText(b, "stream error: 429 Too Many Requests, retry after 30 s")
}

func BenchmarkReader(b *testing.B) {
	chunk := []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"working"}]}}` + "\n" +
		`{"type":"user","message":{"content":[{"type":"tool_result","content":"ok 12 tests"}]}}` + "\n")
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	r := Default().NewReader()
	for b.Loop() {
		_, _ = r.Feed(chunk, now)
	}
}
