package karvifake

import (
	"testing"
	"time"
)

// At time scale 60 the fake's bucket refills a minute's quota in a
// second: from empty, a request every 1/120 s of a fake clock is each
// admitted at karvi's default limit; at scale 1 only a second's refill is.
func TestRateLimitAtTheTimeScale(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	admitted := func(s *Server) int {
		capacity := float64(DefaultRateLimit)
		b := &bucket{tokens: 0, last: t0}
		ok := 0
		for i := range DefaultRateLimit {
			at := t0.Add(time.Duration(i+1)*time.Second/DefaultRateLimit + time.Microsecond)
			if b.take(at, capacity, s.refill(capacity)) {
				ok++
			}
		}
		return ok
	}
	if got := admitted(New(Options{TimeScale: 60})); got != DefaultRateLimit {
		t.Errorf("scale 60: %d of %d requests within a second admitted, want all", got, DefaultRateLimit)
	}
	if got := admitted(New(Options{})); got != 2 {
		t.Errorf("scale 1: %d requests within a second admitted, want 2 (a second's refill of 120 a minute)", got)
	}
}
