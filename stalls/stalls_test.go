package stalls

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAction(t *testing.T) {
	for in, want := range map[string]Action{"": Warn, "warn": Warn, "redispatch": Redispatch, "abort": Abort} {
		got, err := ParseAction(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := ParseAction("kill")
	assert.EqualError(t, err, `"kill": want warn, redispatch or abort`)
}

func TestCheckRefusesAThresholdNotShorterThanTheTimeout(t *testing.T) {
	cases := []struct {
		after, timeout time.Duration
		err            string
	}{
		{after: 5 * time.Second, timeout: time.Minute},
		{after: 15 * time.Minute, timeout: 0},
		{after: time.Minute, timeout: time.Minute,
			err: "stallAfterSec: 1m0s must be shorter than the phase timeout of 1m0s (a phase silent that long times out first)"},
		{after: 10 * time.Minute, timeout: 5 * time.Minute,
			err: "stallAfterSec: 10m0s must be shorter than the phase timeout of 5m0s (a phase silent that long times out first)"},
		{after: 500 * time.Millisecond, timeout: time.Minute,
			err: "stallAfterSec: 500ms is shorter than the least stall threshold of 1s"},
		{after: 0, timeout: time.Minute, err: "stallAfterSec: 0s is shorter than the least stall threshold of 1s"},
	}
	for _, c := range cases {
		err := Check("stallAfterSec", c.after, c.timeout)
		if c.err == "" {
			assert.NoError(t, err, "%s of %s", c.after, c.timeout)
		} else {
			assert.EqualError(t, err, c.err)
		}
	}
}

func TestEffectiveThreshold(t *testing.T) {
	cases := []struct {
		name                      string
		dispatch, worker, timeout time.Duration
		want                      time.Duration
	}{
		{"the dispatch's own wins", 3 * time.Second, 15 * time.Minute, time.Hour, 3 * time.Second},
		{"the worker's default under the timeout", 0, 15 * time.Minute, time.Hour, 15 * time.Minute},
		{"the worker's default not under the timeout: the timeout comes first", 0, 15 * time.Minute, 5 * time.Minute, 0},
		{"the worker's default equal to the timeout", 0, 5 * time.Minute, 5 * time.Minute, 0},
		{"no timeout known", 0, 15 * time.Minute, 0, 15 * time.Minute},
		{"the worker's threshold off", 0, 0, time.Hour, 0},
		{"the dispatch's own, a template's shorter timeout comes first", 10 * time.Minute, 0, 5 * time.Minute, 0},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Effective(c.dispatch, c.worker, c.timeout), c.name)
	}
}

func TestStalledAndUntil(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	after := 15 * time.Minute
	cases := []struct {
		now     time.Time
		stalled bool
		until   time.Duration
	}{
		{t0, false, after},
		{t0.Add(after - time.Second), false, time.Second},
		{t0.Add(after), true, 0},
		{t0.Add(after + time.Hour), true, -time.Hour},
	}
	for _, c := range cases {
		assert.Equal(t, c.stalled, Stalled(t0, c.now, after), c.now)
		assert.Equal(t, c.until, Until(t0, c.now, after), c.now)
	}
	assert.False(t, Stalled(t0, t0.Add(24*time.Hour), 0), "a zero threshold never stalls")
	assert.Greater(t, Until(t0, t0, 0), 100*365*24*time.Hour)
}
