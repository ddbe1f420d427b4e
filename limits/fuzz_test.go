package limits

import (
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzDetect: Text, Line and Reader never panic, are deterministic, keep
// their invariants, and a Reader fed in any chunks agrees with Line.
func FuzzDetect(f *testing.F) {
	for _, s := range []string{
		`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1773158400,"rateLimitType":"five_hour"}}`,
		`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"You've hit your limit · resets 3:30am (Europe/Moscow)","total_cost_usd":0}`,
		`{"type":"error","message":"You've hit your usage limit. Upgrade to Pro or try again at Sep 26th, 2026 3:05 PM."}`,
		`{"type":"turn.failed","error":{"message":"Rate limit reached for gpt-5. Please try again in 6.379s."}}`,
		"Claude AI usage limit reached|1773158400",
		"You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC.",
		"upstream: 429 Too Many Requests, retry after 30 s",
		"--- FAIL: TestRateLimit\nexpected rate limit 10 got 5",
		"resets Feb 29, 11:59pm (Asia/Calcutta)",
		"You've hit your limit · resets 99:99 (../../etc/passwd)",
	} {
		f.Add(s, int64(1773151200), uint8(7))
	}
	d, err := New(Config{Zone: "Europe/Berlin", Patterns: []Pattern{{Name: "p", Match: `quota gone until (?P<reset>.{0,40})$`, Reset: ResetTime}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string, unix int64, chunk uint8) {
		now := time.Unix(unix%(1<<34), 0)
		for _, det := range []*Detector{d} { // d holds every built-in pattern too
			a, b := det.Text(s, now), det.Text(s, now)
			if a != b {
				t.Fatalf("Text not deterministic: %+v vs %+v", a, b)
			}
			check(t, a)
			l1, l2 := det.Line([]byte(s), now), det.Line([]byte(s), now)
			if l1 != l2 {
				t.Fatalf("Line not deterministic: %+v vs %+v", l1, l2)
			}
			check(t, l1)

			// A Reader given the text in chunks finds the first limit that
			// Line finds line by line.
			r := det.NewReader()
			size := int(chunk%31) + 1
			var got Verdict
			var ok bool
			for i := 0; i < len(s) && !ok; i += size {
				got, ok = r.Feed([]byte(s[i:min(i+size, len(s))]), now)
			}
			if !ok {
				got, ok = r.End(now)
			}
			var want Verdict
			var wantOK bool
			rest := s
			for !wantOK && rest != "" {
				line := rest
				if i := indexNL(rest); i >= 0 {
					line, rest = rest[:i], rest[i+1:]
				} else {
					rest = ""
				}
				if len(line) <= MaxLine {
					want = det.Line([]byte(line), now)
					wantOK = want.Limited
				}
			}
			if ok != wantOK || ok && got != want {
				t.Fatalf("Reader %v %+v, lines %v %+v", ok, got, wantOK, want)
			}
		}
	})
}

func indexNL(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return i
		}
	}
	return -1
}

func check(t *testing.T, v Verdict) {
	t.Helper()
	if !v.Limited && v != (Verdict{}) {
		t.Fatalf("not limited but not empty: %+v", v)
	}
	if v.Limited && v.Source == "" {
		t.Fatalf("limited without a source: %+v", v)
	}
	if !v.ResetAt.IsZero() && v.ResetAt.Location() != time.UTC {
		t.Fatalf("reset not in UTC: %+v", v)
	}
	if !utf8.ValidString(v.Text) {
		t.Fatalf("excerpt not valid UTF-8: %q", v.Text)
	}
	if len(v.Text) > 4*(excerptBefore+excerptAfter) {
		t.Fatalf("excerpt too long: %d", len(v.Text))
	}
}
