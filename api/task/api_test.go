package taskapi

import (
	"testing"
	"time"

	"karvi-edda-temporal/internal/timescale"
)

// The time scale divides every default period of the tuning; a period
// set is used as given, and a nil tuning is real time.
func TestTuningDefaultsFollowTheTimeScale(t *testing.T) {
	scaled := &Tuning{TimeScale: 60}
	set := &Tuning{TimeScale: 60, PauseMargin: 7 * time.Second, PauseWait: 8 * time.Second,
		SlotAskEvery: 9 * time.Second, HostGrace: 10 * time.Second, TailWait: 11 * time.Second, SilenceGrace: 12 * time.Second}
	for _, tc := range []struct {
		name              string
		of                func(*Tuning) time.Duration
		def, scaled, kept time.Duration
	}{
		{"PauseMargin", (*Tuning).PauseMarginOrDefault, time.Minute, time.Second, 7 * time.Second},
		{"PauseWait", (*Tuning).PauseWaitOrDefault, 30 * time.Minute, 30 * time.Second, 8 * time.Second},
		{"SlotAskEvery", (*Tuning).SlotAskEveryOrDefault, 5 * time.Minute, 5 * time.Second, 9 * time.Second},
		{"HostGrace", (*Tuning).HostGraceOrDefault, 5 * time.Minute, 5 * time.Second, 10 * time.Second},
		{"TailWait", (*Tuning).TailWaitOrDefault, 10 * time.Minute, 10 * time.Second, 11 * time.Second},
		// Slack for a real conductor against a real plan timeout.
		{"SilenceGrace", (*Tuning).SilenceGraceOrDefault, 30 * time.Second, 30 * time.Second, 12 * time.Second},
	} {
		if got := tc.of(nil); got != tc.def {
			t.Errorf("%s of a nil tuning = %s, want %s", tc.name, got, tc.def)
		}
		if got := tc.of(&Tuning{}); got != tc.def {
			t.Errorf("%s of an empty tuning = %s, want %s", tc.name, got, tc.def)
		}
		if got := tc.of(scaled); got != tc.scaled {
			t.Errorf("%s at scale 60 = %s, want %s", tc.name, got, tc.scaled)
		}
		if got := tc.of(set); got != tc.kept {
			t.Errorf("%s set at scale 60 = %s, want %s as given", tc.name, got, tc.kept)
		}
	}
	if got := scaled.MaxPausesOrDefault(); got != 10 {
		t.Errorf("MaxPauses at scale 60 = %d: a count does not scale", got)
	}
}

func TestWithScale(t *testing.T) {
	if got := WithScale(nil, timescale.One); got != nil {
		t.Errorf("WithScale(nil, 1) = %+v, want nil: production inputs stay as they were", got)
	}
	mine := &Tuning{PauseWait: time.Second}
	if got := WithScale(mine, 0); got != mine {
		t.Errorf("WithScale(t, 0) = %+v, want t itself", got)
	}
	got := WithScale(mine, 60)
	if got == mine || got.TimeScale != 60 || got.PauseWait != time.Second || mine.TimeScale != 0 {
		t.Errorf("WithScale(t, 60) = %+v (t %+v): want a copy of t at 60, t untouched", got, mine)
	}
	if got := WithScale(nil, 60); got == nil || got.TimeScale != 60 {
		t.Errorf("WithScale(nil, 60) = %+v", got)
	}
	own := &Tuning{TimeScale: 10}
	if got := WithScale(own, 60); got != own {
		t.Errorf("WithScale of a tuning that names its scale = %+v, want it kept", got)
	}
	if got := (*Tuning)(nil).Scale(); got != timescale.One {
		t.Errorf("nil tuning's scale = %v", got)
	}
}
