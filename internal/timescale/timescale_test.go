package timescale

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Scale
		wantErr string
	}{
		{in: "", want: 1},
		{in: "1", want: 1},
		{in: " 60 ", want: 60},
		{in: "1.5", want: 1.5},
		{in: "3600", want: 3600},
		{in: "1e3", want: 1000},
		{in: "0", wantErr: `time scale "0": want at least 1`},
		{in: "0.5", wantErr: `time scale "0.5": want at least 1`},
		{in: "-60", wantErr: `time scale "-60": want at least 1`},
		{in: "fast", wantErr: `time scale "fast": want a number of at least 1`},
		{in: "60s", wantErr: `time scale "60s": want a number`},
		{in: "NaN", wantErr: `time scale "NaN": want a number`},
		{in: "Inf", wantErr: `time scale "Inf": want a number`},
	} {
		got, err := Parse(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		s    Scale
		d    time.Duration
		want time.Duration
	}{
		{s: 0, d: time.Minute, want: time.Minute},
		{s: 1, d: 30 * time.Minute, want: 30 * time.Minute},
		{s: 60, d: time.Minute, want: time.Second},
		{s: 60, d: 30 * time.Minute, want: 30 * time.Second},
		{s: 2, d: 15 * time.Second, want: 7500 * time.Millisecond},
		{s: 1.5, d: 3 * time.Second, want: 2 * time.Second},
		// Never below a millisecond: a timer of zero fires at once.
		{s: 3600, d: time.Second, want: time.Millisecond},
		{s: 1e9, d: time.Nanosecond, want: time.Millisecond},
		{s: 60, d: 0, want: 0},
		{s: 60, d: -time.Second, want: -time.Second},
	} {
		if got := tc.s.Of(tc.d); got != tc.want {
			t.Errorf("Scale(%v).Of(%s) = %s, want %s", float64(tc.s), tc.d, got, tc.want)
		}
	}
}

func TestStringScaled(t *testing.T) {
	for _, tc := range []struct {
		s      Scale
		str    string
		scaled bool
	}{
		{0, "1", false},
		{1, "1", false},
		{60, "60", true},
		{1.5, "1.5", true},
	} {
		if got := tc.s.String(); got != tc.str {
			t.Errorf("Scale(%v).String() = %q, want %q", float64(tc.s), got, tc.str)
		}
		if got := tc.s.Scaled(); got != tc.scaled {
			t.Errorf("Scale(%v).Scaled() = %v, want %v", float64(tc.s), got, tc.scaled)
		}
	}
}

func TestFlag(t *testing.T) {
	var s Scale = 1
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	fs.Var(&s, "time-scale", "")
	if err := fs.Parse([]string{"-time-scale", "60"}); err != nil || s != 60 {
		t.Fatalf("-time-scale 60: %v, %v", s, err)
	}
	if got := fs.Lookup("time-scale").Value.(flag.Getter).Get(); got != Scale(60) {
		t.Errorf("Get() = %v", got)
	}
	if err := fs.Parse([]string{"-time-scale", "0.1"}); err == nil || !strings.Contains(err.Error(), `"0.1"`) {
		t.Errorf("-time-scale 0.1: %v, want an error naming the value", err)
	}
}
