package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLine(t *testing.T) {
	never := time.Time{}
	cases := []struct {
		name, line string
		limited    bool
		source     string
		reset      time.Time
	}{
		{"rate_limit_event rejected", `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1773158400,"rateLimitType":"five_hour"},"session_id":"s1"}`, true, SourceRateLimitEvent, utc(2026, 3, 10, 16, 0, 0)},
		{"rate_limit_event rejected, no reset", `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","rateLimitType":"seven_day"}}`, true, SourceRateLimitEvent, never},
		{"rate_limit_event resetsAt as a float", `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1773158400.0}}`, true, SourceRateLimitEvent, utc(2026, 3, 10, 16, 0, 0)},
		{"rate_limit_event allowed", `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1773158400}}`, false, "", never},
		{"rate_limit_event warning", `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1773158400}}`, false, "", never},
		{"success-shaped 429 result", `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"duration_ms":412,"result":"You've hit your limit · resets 3:30am (Europe/Moscow)","total_cost_usd":0,"session_id":"s1"}`, true, SourceAPIErrorStatus, utc(2026, 3, 11, 0, 30, 0)},
		{"429 result, unknown text", `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"Something else"}`, true, SourceAPIErrorStatus, never},
		{"429 result, status as a string", `{"type":"result","subtype":"success","is_error":true,"api_error_status":"429","result":"Please try again in 20s"}`, true, SourceAPIErrorStatus, now.Add(20 * time.Second)},
		{"error result with a limit text", `{"type":"result","subtype":"error_during_execution","is_error":true,"api_error_status":400,"result":"You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC."}`, true, "pattern:anthropic-api-usage-limits", utc(2026, 4, 1, 0, 0, 0)},
		{"500 error result", `{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"result":"API Error: 500 Internal server error"}`, false, "", never},
		{"older: limit text in a non-error result", `{"type":"result","subtype":"success","is_error":false,"result":"Claude AI usage limit reached|1773158400","total_cost_usd":0}`, true, "pattern:claude-usage-limit-unix", utc(2026, 3, 10, 16, 0, 0)},
		{"a normal result that talks about limits", `{"type":"result","subtype":"success","is_error":false,"result":"Done. I fixed the limiter: when the rate limit is exceeded it answers 429 and says retry after 30s. Note: You've hit your limit is the message users see.","total_cost_usd":0.42}`, false, "", never},
		{"a normal success", `{"type":"result","subtype":"success","is_error":false,"result":"All tests pass.","total_cost_usd":0.12}`, false, "", never},
		{"codex error", `{"type":"error","message":"You've hit your usage limit. Upgrade to Pro or try again at 3:42 PM."}`, true, "pattern:hit-your-limit", utc(2026, 3, 10, 15, 42, 0)},
		{"codex turn.failed", `{"type":"turn.failed","error":{"message":"Rate limit reached for gpt-5 in organization org-x on tokens per min. Please try again in 6.379s."}}`, true, "pattern:openai-rate-limit-reached", now.Add(6379 * time.Millisecond)},
		{"codex error, generic", `{"type":"error","message":"stream disconnected: 429 Too Many Requests, retry after 12 seconds"}`, true, SourceGeneric, now.Add(12 * time.Second)},
		{"codex error, other", `{"type":"error","message":"stream disconnected before completion"}`, false, "", never},
		{"tool output quoting a limit", `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"You've hit your limit · resets 3am\n--- FAIL: TestRateLimit","is_error":true}]}}`, false, "", never},
		{"assistant text quoting a limit", `{"type":"assistant","message":{"content":[{"type":"text","text":"Claude AI usage limit reached|1773158400"}]}}`, false, "", never},
		{"system init", `{"type":"system","subtype":"init","session_id":"s1","tools":["Bash"]}`, false, "", never},
		{"plain text line", `You've hit your limit · resets 3:30am (Europe/Moscow)`, true, "pattern:hit-your-limit", utc(2026, 3, 11, 0, 30, 0)},
		{"broken JSON read as text", `{"type":"result","result":"You've hit your limit · resets 3am (UTC)"`, true, "pattern:hit-your-limit", utc(2026, 3, 11, 3, 0, 0)},
		{"429 result without text", `{"type":"result","subtype":"success","is_error":true,"api_error_status":429}`, true, SourceAPIErrorStatus, never},
		{"blank", "   \r", false, "", never},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Default().Line([]byte(tc.line), now)
			assert.Equal(t, tc.limited, v.Limited, "%+v", v)
			assert.Equal(t, tc.source, v.Source)
			assert.True(t, tc.reset.Equal(v.ResetAt), "reset: want %v, got %v", tc.reset, v.ResetAt)
			if v.Limited {
				assert.NotEmpty(t, v.Text)
			}
		})
	}
}

func TestLineTextRedacted(t *testing.T) {
	line := `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"You've hit your limit (Authorization: Bearer Zq9abcdefghijklmnopqrstuvwxyz) · resets 3am (UTC)"}`
	v := Default().Line([]byte(line), now)
	require.True(t, v.Limited)
	assert.NotContains(t, v.Text, "Zq9abcdefghijklmnopqrstuvwxyz")
	v = Default().Line([]byte(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","rateLimitType":"`+strings.Repeat("ab", 100)+`"}}`), now)
	assert.LessOrEqual(t, len(v.Text), 80)
}

func TestReader(t *testing.T) {
	transcript := strings.Join([]string{
		`{"type":"system","subtype":"init","session_id":"s1"}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","content":"expected rate limit 10 got 5"}]}}`,
		`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1773158400,"rateLimitType":"five_hour"}}`,
		`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"You've hit your limit · resets 3:30am (Europe/Moscow)"}`,
		``,
	}, "\n")
	// Every split into chunks gives the same first verdict.
	for size := 1; size <= len(transcript); size += 7 {
		r := Default().NewReader()
		var v Verdict
		var ok bool
		for i := 0; i < len(transcript); i += size {
			v, ok = r.Feed([]byte(transcript[i:min(i+size, len(transcript))]), now)
		}
		require.True(t, ok, "chunk %d", size)
		assert.Equal(t, SourceRateLimitEvent, v.Source)
		assert.True(t, utc(2026, 3, 10, 16, 0, 0).Equal(v.ResetAt))
		assert.Equal(t, 3, r.Lines(), "lines after the first limit are not judged")
	}

	// A partial last line is not judged until it ends, or until End.
	r := Default().NewReader()
	_, ok := r.Feed([]byte(`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"x"`), now)
	assert.False(t, ok)
	_, ok = r.Feed([]byte(`}`), now)
	assert.False(t, ok)
	v, ok := r.End(now)
	assert.True(t, ok)
	assert.Equal(t, SourceAPIErrorStatus, v.Source)
	v2, ok2 := r.Verdict()
	assert.Equal(t, v, v2)
	assert.True(t, ok2)

	// CRLF line ends.
	r = Default().NewReader()
	_, ok = r.Feed([]byte("{\"type\":\"system\"}\r\nClaude AI usage limit reached|1773158400\r\n"), now)
	assert.True(t, ok)

	// Nothing found: nothing reported.
	r = Default().NewReader()
	_, ok = r.Feed([]byte(`{"type":"result","subtype":"success","is_error":false,"result":"ok"}`+"\n"), now)
	assert.False(t, ok)
	_, ok = r.End(now)
	assert.False(t, ok)
}

func TestReaderSkipsOverlongLines(t *testing.T) {
	r := Default().NewReader()
	big := `{"type":"error","message":"You've hit your limit ` + strings.Repeat("x", MaxLine) + `"}`
	for i := 0; i < len(big); i += 4096 {
		_, ok := r.Feed([]byte(big[i:min(i+4096, len(big))]), now)
		require.False(t, ok)
	}
	assert.LessOrEqual(t, cap(r.partial), 2*MaxLine, "the buffer stays bounded")
	v, ok := r.Feed([]byte("\nClaude AI usage limit reached|1773158400\n"), now)
	require.True(t, ok)
	assert.Equal(t, "pattern:claude-usage-limit-unix", v.Source)
	assert.Equal(t, 1, r.Lines())
	// In one piece, too.
	r = Default().NewReader()
	_, ok = r.Feed([]byte(big+"\n"), now)
	assert.False(t, ok)
	assert.Equal(t, 0, r.Lines())
}

func TestUntil(t *testing.T) {
	assert.Equal(t, 2*time.Hour, Verdict{Limited: true, ResetAt: now.Add(2 * time.Hour)}.Until(now, time.Hour))
	assert.Equal(t, time.Duration(0), Verdict{Limited: true, ResetAt: now.Add(-time.Minute)}.Until(now, time.Hour))
	assert.Equal(t, time.Hour, Verdict{Limited: true}.Until(now, time.Hour))
	assert.Equal(t, time.Duration(0), Verdict{Limited: true}.Until(now, -time.Hour))
}
