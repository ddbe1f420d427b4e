package intent

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseCronErrorsNameTheField(t *testing.T) {
	for expr, want := range map[string]string{
		"":                        "empty expression",
		"* * * *":                 "has 4 fields",
		"* * * * * * * *":         "has 8 fields",
		"61 * * * *":              "minute: 61 is out of range 0-59",
		"* 24 * * *":              "hour: 24 is out of range 0-23",
		"* * 0 * *":               "day-of-month: 0 is out of range 1-31",
		"* * * 13 *":              "month: 13 is out of range 1-12",
		"* * * * 8":               "day-of-week: 8 is out of range 0-7",
		"60 * * * * * *":          "second: 60 is out of range 0-59",
		"* * * * * 1999":          "year: 1999 is out of range 2000-2100",
		"* * * foo *":             `month: "foo" is not a month name`,
		"* * * * xyz":             `day-of-week: "xyz" is not a day-of-week name`,
		"5-1 * * * *":             `minute: "5-1": range ends before it starts`,
		"*/0 * * * *":             "minute: \"*/0\": step must be a whole number of at least 1",
		"1,,2 * * * *":            "minute: empty item between commas",
		"a * * * *":               `minute: "a" is not a number`,
		"@often":                  "unknown shorthand",
		"@every":                  "missing interval",
		"@every soon":             "not a duration",
		"@every 500ms":            "under a second",
		"@every 1s.1s":            "whole number of seconds",
		"@every 90s/1500ms":       "whole number of seconds",
		"@every 1h/2h":            "offset 2h0m0s must be shorter than the interval",
		"CRON_TZ=UTC * * * * *":   "time zone",
		"0 9 * * * # mornings":    "comments",
		strings.Repeat("1,", 300): "longer than",
	} {
		_, err := ParseCron(expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCron(%q) = %v, want an error containing %q", expr, err, want)
		}
	}
}

func TestCronNext(t *testing.T) {
	utc := time.UTC
	paris := mustZone(t, "Europe/Paris")
	at := func(s string, loc *time.Location) time.Time {
		t.Helper()
		v, err := time.ParseInLocation(time.DateTime, s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		expr  string
		loc   *time.Location
		after string
		want  []string // successive fire times, in loc
	}{
		{"*/5 * * * * * *", utc, "2026-03-01 10:00:03", []string{"2026-03-01 10:00:05", "2026-03-01 10:00:10"}},
		{"0 9 * * mon-fri", utc, "2026-03-06 09:00:00", []string{"2026-03-09 09:00:00", "2026-03-10 09:00:00"}}, // Friday, then Monday
		{"0 0 1 jan *", utc, "2026-06-01 00:00:00", []string{"2027-01-01 00:00:00"}},
		{"@hourly", utc, "2026-03-01 10:59:59", []string{"2026-03-01 11:00:00", "2026-03-01 12:00:00"}},
		{"30 8 * * 7", utc, "2026-03-01 09:00:00", []string{"2026-03-08 08:30:00"}},                         // 7 is Sunday
		{"0 12 13 * 5", utc, "2026-01-01 00:00:00", []string{"2026-02-13 12:00:00", "2026-03-13 12:00:00"}}, // Friday the 13th: both must match
		{"0 0 29 2 *", utc, "2026-01-01 00:00:00", []string{"2028-02-29 00:00:00"}},
		{"0 0 * * * 2027", utc, "2026-12-31 23:00:00", []string{"2027-01-01 00:00:00"}},
		{"0 9 * * *", paris, "2026-03-28 12:00:00", []string{"2026-03-29 09:00:00", "2026-03-30 09:00:00"}},
		// Spring forward in Paris: 02:30 does not exist on 29 March 2026.
		{"30 2 * * *", paris, "2026-03-28 03:00:00", []string{"2026-03-30 02:30:00"}},
		{"0 10 1 * *", utc, "2026-01-31 12:00:00", []string{"2026-02-01 10:00:00"}},
		{"@every 90s", utc, "1970-01-01 00:00:00", []string{"1970-01-01 00:01:30", "1970-01-01 00:03:00"}},
		{"@every 1d/2h", utc, "2026-03-01 01:00:00", []string{"2026-03-01 02:00:00", "2026-03-02 02:00:00"}},
	} {
		cron, err := ParseCron(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		prev := at(c.after, c.loc)
		for _, w := range c.want {
			got := cron.Next(prev, c.loc)
			if want := at(w, c.loc); !got.Equal(want) {
				t.Fatalf("%s after %s: got %s, want %s", c.expr, prev.In(c.loc), got.In(c.loc), want)
			}
			prev = got
		}
	}
}

// Fall back in Paris: the wall clock goes through 02:00-02:59 twice on 25
// October 2026. As on the server (the e2e suite compares), a daily 02:30
// fires once, at the later instant; an expression that walks into the
// repeated hour from the one before fires at the start of its first copy,
// then goes on in the second.
func TestCronRepeatedHour(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	daily, err := ParseCron("30 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	got := daily.Next(time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC), paris)
	if want := time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("daily: %s, want %s", got, want)
	}
	if next := daily.Next(got, paris); next.Sub(got) != 24*time.Hour {
		t.Fatalf("after the repeat: %s", next)
	}
	half, err := ParseCron("*/30 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	var walk []string
	at := time.Date(2026, 10, 24, 23, 15, 0, 0, time.UTC) // 01:15 CEST
	for range 6 {
		at = half.Next(at, paris)
		walk = append(walk, at.In(paris).Format("15:04 MST"))
	}
	if fmt.Sprint(walk) != "[01:30 CEST 02:00 CEST 02:30 CET 03:00 CET 03:30 CET 04:00 CET]" {
		t.Fatalf("every half hour: %v", walk)
	}
}

func TestCronNeverFires(t *testing.T) {
	cron, err := ParseCron("0 0 30 2 *") // 30 February
	if err != nil {
		t.Fatal(err)
	}
	if got := cron.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC); !got.IsZero() {
		t.Fatalf("got %s", got)
	}
}

func TestTimesCountMatchesMinGap(t *testing.T) {
	cron, _ := ParseCron("*/10 * * * * * *")
	times := Times{cron: cron, loc: time.UTC}
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if n := times.Count(base, base.Add(time.Minute), 100); n != 6 {
		t.Fatalf("count in a minute: %d", n)
	}
	if n := times.Count(base, base.Add(time.Minute), 2); n != 2 {
		t.Fatalf("count stops at the limit: %d", n)
	}
	if !times.Matches(base.Add(20*time.Second)) || times.Matches(base.Add(21*time.Second)) {
		t.Fatal("Matches")
	}
	if gap, ok := times.MinGap(base); !ok || gap != 10*time.Second {
		t.Fatalf("gap %s %v", gap, ok)
	}
	weekdays, _ := ParseCron("0 9 * * 1-5")
	if gap, _ := (Times{cron: weekdays, loc: time.UTC}).MinGap(base); gap != 24*time.Hour {
		t.Fatalf("weekday gap %s", gap)
	}
	once := Times{once: base, loc: time.UTC}
	if _, ok := once.MinGap(base.Add(-time.Hour)); ok {
		t.Fatal("a one-shot has no gap")
	}
	if once.Next(base) != (time.Time{}) || !once.Next(base.Add(-time.Second)).Equal(base) {
		t.Fatal("one-shot Next")
	}
}
