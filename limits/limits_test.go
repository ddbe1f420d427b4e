package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// now is fixed: Tuesday 2026-03-10 14:00 UTC (after the US switched to
// summer time on March 8, before Europe does on March 29).
var now = time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)

func utc(y int, m time.Month, d, h, min, s int) time.Time {
	return time.Date(y, m, d, h, min, s, 0, time.UTC)
}

func TestTextForms(t *testing.T) {
	never := time.Time{}
	cases := []struct {
		name, text, source string
		reset              time.Time
	}{
		// Claude Code.
		{"claude unix", "Claude AI usage limit reached|1773158400", "pattern:claude-usage-limit-unix", utc(2026, 3, 10, 16, 0, 0)},
		{"claude unix milliseconds", "Claude AI usage limit reached|1773158400000", "pattern:claude-usage-limit-unix", utc(2026, 3, 10, 16, 0, 0)},
		{"claude older wording", "Claude usage limit reached. Your limit will reset at 3pm (Europe/London).", "pattern:claude-usage-limit", utc(2026, 3, 10, 15, 0, 0)},
		{"reached your limit", "You've reached your usage limit · resets 9pm (UTC)", "pattern:hit-your-limit", utc(2026, 3, 10, 21, 0, 0)},
		{"claude no reset", "Claude AI usage limit reached.", "pattern:claude-usage-limit", never},
		{"hit your limit Moscow", "You've hit your limit · resets 3:30am (Europe/Moscow)", "pattern:hit-your-limit", utc(2026, 3, 11, 0, 30, 0)},
		{"typographic apostrophe", "You’ve hit your limit · resets 3:30am (Europe/Moscow)", "pattern:hit-your-limit", utc(2026, 3, 11, 0, 30, 0)},
		{"five-hour, no zone is UTC, next noon", "5-hour limit reached ∙ resets 12pm", "pattern:claude-window-limit-reached", utc(2026, 3, 11, 12, 0, 0)},
		{"weekly", "Weekly limit reached ∙ resets 6pm", "pattern:claude-window-limit-reached", utc(2026, 3, 10, 18, 0, 0)},
		{"session Los Angeles (summer time)", "You've hit your session limit · resets 12:50am (America/Los_Angeles)", "pattern:hit-your-limit", utc(2026, 3, 11, 7, 50, 0)},
		{"date without year already past: next year", "You've hit your limit · resets Jan 18, 11:30am (Asia/Calcutta)", "pattern:hit-your-limit", utc(2027, 1, 18, 6, 0, 0)},
		{"date with at", "You've hit your limit · resets Apr 23 at 4pm (America/Recife)", "pattern:hit-your-limit", utc(2026, 4, 23, 19, 0, 0)},
		{"extra usage Tokyo", "You're out of extra usage · resets 7:30pm (Asia/Tokyo)", "pattern:claude-extra-usage", utc(2026, 3, 10, 10, 30, 0).Add(24 * time.Hour)},
		{"extra usage Berlin", "You're out of extra usage · resets 7:30pm (Europe/Berlin)", "pattern:claude-extra-usage", utc(2026, 3, 10, 18, 30, 0)},
		{"lowercase zone", "You've hit your limit · resets 3:30am (europe/moscow)", "pattern:hit-your-limit", utc(2026, 3, 11, 0, 30, 0)},
		{"unknown zone: reset unknown", "You've hit your limit · resets 3:30am (Mars/Olympus)", "pattern:hit-your-limit", never},
		{"request rejected 429", "API Error: Request rejected (429) · Rate limited", "pattern:claude-request-rejected-429", never},
		{"anthropic 429 body", `API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, "pattern:anthropic-rate-limit-error", never},
		{"anthropic spend cap", "You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC.", "pattern:anthropic-api-usage-limits", utc(2026, 4, 1, 0, 0, 0)},
		// Codex and the OpenAI API.
		{"codex clock", "You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at 3:42 PM.", "pattern:hit-your-limit", utc(2026, 3, 10, 15, 42, 0)},
		{"codex clock passed: tomorrow", "ERROR: You've hit your usage limit. Try again at 9:05 AM.", "pattern:hit-your-limit", utc(2026, 3, 11, 9, 5, 0)},
		{"codex date", "You've hit your usage limit. Upgrade to Plus to continue using Codex, or try again at Sep 26th, 2026 3:05 PM.", "pattern:hit-your-limit", utc(2026, 9, 26, 15, 5, 0)},
		{"codex later", "You've hit your usage limit. Try again later.", "pattern:hit-your-limit", never},
		{"codex spend cap", "You hit your spend cap. Raise it in settings.", "pattern:codex-spend-cap", never},
		{"codex credits", "Your workspace is out of credits.", "pattern:codex-out-of-credits", never},
		{"quota exceeded", "Quota exceeded. Check your plan and billing details.", "pattern:openai-quota-exceeded", never},
		{"openai rate limit reached", "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 6.379s. Visit https://platform.openai.com/account/rate-limits", "pattern:openai-rate-limit-reached", now.Add(6379 * time.Millisecond)},
		{"openai seconds", "Rate limit reached for o3 on requests per day. Try again in 17 seconds.", "pattern:openai-rate-limit-reached", now.Add(17 * time.Second)},
		{"openai minutes and seconds", "Rate limit reached for gpt-5 on tokens per min. Please try again in 1m30s.", "pattern:openai-rate-limit-reached", now.Add(90 * time.Second)},
		// Generic: a limit statement and a reset phrase on one line.
		{"generic retry after", "upstream: 429 Too Many Requests, retry after 30 s", "pattern:generic", now.Add(30 * time.Second)},
		{"generic try again in", "stream error: rate limit exceeded. Try again in 17 seconds.", "pattern:generic", now.Add(17 * time.Second)},
		{"generic resets at zone", "usage limit exceeded, resets at 4pm (Europe/Paris)", "pattern:generic", utc(2026, 3, 10, 15, 0, 0)},
		{"generic resets no zone", "quota exceeded; resets 23:15", "pattern:generic", utc(2026, 3, 10, 23, 15, 0)},
		{"generic date on", "rate limit reached: you can continue on 2026-04-01 at 00:00 UTC", "pattern:generic", utc(2026, 4, 1, 0, 0, 0)},
		{"generic month date on", "monthly quota exceeded; access returns on Apr 1 at 9am (Europe/Paris)", "pattern:generic", utc(2026, 4, 1, 7, 0, 0)},
		{"generic resets on date", "quota exhausted, resets on 2026-04-01 at 00:00 UTC", "pattern:generic", utc(2026, 4, 1, 0, 0, 0)},
		{"generic retry-after header", "HTTP 429 Too Many Requests\nRetry-After: 120\n", "pattern:generic", never},
		{"generic header same line", "HTTP 429 Too Many Requests; Retry-After: 120", "pattern:generic", now.Add(2 * time.Minute)},
		{"in a longer error", "check failed: cmd_succeeds: exit 1: claude: You've hit your limit · resets 3:30am (Europe/Moscow)\nmore", "pattern:hit-your-limit", utc(2026, 3, 11, 0, 30, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Default().Text(tc.text, now)
			if tc.name == "generic retry-after header" {
				// a header on the next line is no statement on this one:
				// not a limit.
				assert.False(t, v.Limited, "%+v", v)
				return
			}
			require.True(t, v.Limited, "%q", tc.text)
			assert.Equal(t, tc.source, v.Source)
			assert.True(t, tc.reset.Equal(v.ResetAt), "reset: want %v, got %v", tc.reset, v.ResetAt)
			if !v.ResetAt.IsZero() {
				assert.Equal(t, time.UTC, v.ResetAt.Location())
			}
			assert.NotEmpty(t, v.Text)
		})
	}
}

// Texts that mention rate limits but are ordinary failing checks, and agent
// prose: none is a usage limit.
func TestTextNotALimit(t *testing.T) {
	for _, s := range append(append([]string{}, ordinaryFailures...),
		"",
		"test TestRateLimit failed",
		"expected rate limit 10 got 5",
		"--- FAIL: TestRateLimit (0.00s)\n    rl_test.go:12: rate limit exceeded: expected retry after 5s",
		"--- FAIL: TestRetry: expected retry after 5s on 429 Too Many Requests",
		"limiter_test.go:30: want 429 Too Many Requests and retry after 2s, got 200",
		"assert.Equal failed: rate limit exceeded, try again in 3 seconds",
		"panic: rate limit exceeded, retry after 1s",
		"FAIL\tgithub.com/acme/ratelimit\t0.02s",
		"check failed: file_exists: docs/rate-limits.md",
		"implement a rate limiter that returns 429 and a Retry-After header",
		"the cache resets at 3:30am every night",
		"try again in 5 seconds",
		"please retry after 10s",
		"rate limit exceeded", // no reset phrase: an app's own error, not the agent's limit
		"HTTP 429 Too Many Requests",
		"error: usage: limit must be a positive integer",
		"You have reached the end of the file",
		// A check's output is the project's programs talking, never the
		// agent's provider: the generic rule does not read it, even on a
		// line without test words.
		"check failed: cmd_succeeds: exit 1: 2026/03/10 14:00:01 limiter: rate limit exceeded, retry in 100ms",
		"=== RUN   TestBurst\n2026/03/10 14:00:01 limiter: rate limit exceeded, retry in 100ms\n--- FAIL: TestBurst (0.10s)",
		"Traceback (most recent call last):\n  File \"client.py\", line 9\nRateLimitError: 429 Too Many Requests, retry after 2s",
		"test result: FAILED. 3 passed; 1 failed\nthread 'limits' panicked: quota exceeded, try again in 5 seconds",
		"hit the limit of 10 retries",
	) {
		v := Default().Text(s, now)
		assert.False(t, v.Limited, "%q gave %+v", s, v)
		assert.Equal(t, Verdict{}, v)
	}
}

func TestZonesAroundNow(t *testing.T) {
	// The same printed clock in several zones, and a now in another zone:
	// the result is always the next such time after now, in UTC.
	nowNY := time.Date(2026, 3, 10, 10, 0, 0, 0, mustZone(t, "America/New_York")) // 14:00 UTC
	cases := []struct {
		zone string
		want time.Time
	}{
		{"UTC", utc(2026, 3, 11, 9, 0, 0)},
		{"Europe/Moscow", utc(2026, 3, 11, 6, 0, 0)},
		{"Asia/Kolkata", utc(2026, 3, 11, 3, 30, 0)},
		{"America/Los_Angeles", utc(2026, 3, 10, 16, 0, 0)},
		{"Australia/Sydney", utc(2026, 3, 10, 22, 0, 0)},
		{"Pacific/Kiritimati", utc(2026, 3, 10, 19, 0, 0)},
	}
	for _, tc := range cases {
		v := Default().Text("You've hit your limit · resets 9am ("+tc.zone+")", nowNY)
		require.True(t, v.Limited)
		assert.True(t, tc.want.Equal(v.ResetAt), "%s: want %v, got %v", tc.zone, tc.want, v.ResetAt)
	}
	// Config.Zone is the zone of a time printed without one.
	d, err := New(Config{Zone: "Asia/Tokyo"})
	require.NoError(t, err)
	v := d.Text("5-hour limit reached ∙ resets 12pm", now)
	assert.True(t, utc(2026, 3, 11, 3, 0, 0).Equal(v.ResetAt), "%v", v.ResetAt)
	// A printed zone wins over Config.Zone.
	v = d.Text("5-hour limit reached ∙ resets 12pm (UTC)", now)
	assert.True(t, utc(2026, 3, 11, 12, 0, 0).Equal(v.ResetAt), "%v", v.ResetAt)
	// Across a DST change: Berlin moves to summer time on 2026-03-29.
	nowBerlin := time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC)
	v = Default().Text("You've hit your limit · resets 3am (Europe/Berlin)", nowBerlin)
	assert.True(t, utc(2026, 3, 29, 1, 0, 0).Equal(v.ResetAt), "%v", v.ResetAt)
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	require.NoError(t, err)
	return l
}

func TestResetEdges(t *testing.T) {
	cases := []struct {
		text string
		now  time.Time
		want time.Time
	}{
		// exactly now is not after now: the next day
		{"You've hit your limit · resets 2pm (UTC)", now, utc(2026, 3, 11, 14, 0, 0)},
		{"You've hit your limit · resets 12am (UTC)", now, utc(2026, 3, 11, 0, 0, 0)},
		{"You've hit your limit · resets 12:30pm (UTC)", now, utc(2026, 3, 11, 12, 30, 0)},
		{"You've hit your limit · resets 2:00 p.m. (UTC)", now, utc(2026, 3, 11, 14, 0, 0)},
		{"You've hit your limit · resets 13pm (UTC)", now, time.Time{}},
		{"You've hit your limit · resets 25:00", now, time.Time{}},
		{"You've hit your limit · resets Feb 30, 1pm (UTC)", now, time.Time{}},
		{"You've hit your limit · resets in 2 hours", now, now.Add(2 * time.Hour)},
		{"You've hit your limit · resets in 90 minutes", now, now.Add(90 * time.Minute)},
		{"You've hit your limit. Try again in 500ms", now, now.Add(500 * time.Millisecond)},
		{"You've hit your limit. Try again in 9999 days", now, time.Time{}},
		{"Claude AI usage limit reached|0", now, time.Time{}},
		// no now: relative and date-less forms are unknown, absolute ones are read
		{"You've hit your limit · resets 3:30am (Europe/Moscow)", time.Time{}, time.Time{}},
		{"You've hit your limit. Try again in 5s", time.Time{}, time.Time{}},
		{"You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC.", time.Time{}, utc(2026, 4, 1, 0, 0, 0)},
		{"Claude AI usage limit reached|1773158400", time.Time{}, utc(2026, 3, 10, 16, 0, 0)},
	}
	for _, tc := range cases {
		v := Default().Text(tc.text, tc.now)
		require.True(t, v.Limited, tc.text)
		assert.True(t, tc.want.Equal(v.ResetAt), "%q: want %v, got %v", tc.text, tc.want, v.ResetAt)
	}
}

func TestTextIsRedactedAndShort(t *testing.T) {
	secret := "sk-ant-api03-Q7abcdefghijklmnopqrstuvwxyz0123456789"
	long := strings.Repeat("x", 5000)
	v := Default().Text(long+" key="+secret+" You've hit your limit · resets 3am (UTC) "+long, now)
	require.True(t, v.Limited)
	assert.NotContains(t, v.Text, secret)
	assert.Contains(t, v.Text, "hit your limit")
	assert.LessOrEqual(t, len(v.Text), excerptBefore+excerptAfter)
	// invalid UTF-8 around a match stays valid in the excerpt
	v = Default().Text("\xff\xfeYou've hit your limit\xff", now)
	require.True(t, v.Limited)
	assert.True(t, strings.ToValidUTF8(v.Text, "") != "" && !strings.Contains(v.Text, "\xff"))
}

func TestEmbeddedZoneDatabase(t *testing.T) {
	// time/tzdata is linked in, so names resolve without /usr/share/zoneinfo.
	t.Setenv("ZONEINFO", t.TempDir())
	for _, z := range []string{"Europe/Moscow", "Asia/Calcutta", "America/Recife", "America/Los_Angeles"} {
		_, ok := loadZone(z)
		assert.True(t, ok, z)
	}
}
