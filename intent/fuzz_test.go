package intent

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzBuild: Build never panics, and a spec it accepts keeps its
// promises: it validates, survives JSON and a rebuild unchanged, fires at
// least once, its fire times increase and are recognized as its own, and
// its catch-up window is one the server takes.
func FuzzBuild(f *testing.F) {
	for _, seed := range []struct {
		cron, runAt, zone, until, overflow string
		maxRuns, catchUp, maxErrors        int
		minInterval                        int64
	}{
		{"0 9 * * mon-fri", "", "Europe/Paris", "any_of(task_completed, runs>=3)", "defer", 0, 2, 0, 0},
		{"*/5 * * * * * *", "", "UTC", "", "", 3, 0, 5, int64(time.Second)},
		{"", "+10m", "", "task_completed", "skip", 0, 0, 0, 0},
		{"", "2026-03-01 12:00", "America/New_York", "", "", 1, 0, 0, 0},
		{"@every 1d/2h", "", "Asia/Kolkata", "all_of(runs>=2, task_completed)", "", 0, 100, 100, int64(time.Hour)},
		{"30 2 * * 7", "", "Europe/London", "", "", 0, 0, 0, 0},
		{"0 0 29 2 * 2028", "", "UTC", "", "", 0, 0, 0, 0},
	} {
		f.Add(seed.cron, seed.runAt, seed.zone, seed.until, seed.overflow, seed.maxRuns, seed.catchUp, seed.maxErrors, seed.minInterval)
	}
	target := sampleTarget(f)
	f.Fuzz(func(t *testing.T, cron, runAt, zone, until, overflow string, maxRuns, catchUp, maxErrors int, minInterval int64) {
		req := Request{Name: "fuzz", Target: target, Cron: cron, RunAt: runAt, TimeZone: zone, Until: until,
			Overflow: overflow, MaxRuns: maxRuns, CatchUp: catchUp, MaxErrors: maxErrors, MinInterval: time.Duration(minInterval)}
		s, err := Build(req, now)
		if err != nil {
			return
		}
		if err := s.Validate(now); err != nil {
			t.Fatalf("built but invalid: %v", err)
		}
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back Spec
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		again, err := Build(RequestFor(back), now)
		if err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		if a, _ := json.Marshal(again); string(a) != string(data) {
			t.Fatalf("rebuilt differs:\n%s\n%s", a, data)
		}
		times, err := s.Times()
		if err != nil {
			t.Fatal(err)
		}
		prev := now
		for i := range 5 {
			next := times.Next(prev)
			if next.IsZero() {
				if i == 0 {
					t.Fatal("accepted a spec that never fires")
				}
				break
			}
			if !next.After(prev) || !times.Matches(next) {
				t.Fatalf("next after %s: %s (matches %v)", prev, next, times.Matches(next))
			}
			if i > 0 && next.Sub(prev) < s.MinInterval.D() {
				t.Fatalf("fires %s apart, under min_interval %s", next.Sub(prev), s.MinInterval.D())
			}
			prev = next
		}
		if w := s.CatchUpWindow(now); w < serverMinCatchUpWindow || w > maxCatchUpWindow {
			t.Fatalf("catch-up window %s", w)
		}
	})
}

// FuzzParseCondition: the parser never panics, and what it accepts reads
// back from its own writing as the same condition.
func FuzzParseCondition(f *testing.F) {
	for _, s := range []string{"task_completed", "runs>=3", "any_of(task_completed, runs>=5)",
		"all_of(any_of(runs>=1,task_completed),runs>=2)", "none", "any_of(", "runs>=-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ParseCondition(text)
		if err != nil || c == nil {
			return
		}
		again, err := ParseCondition(c.String())
		if err != nil {
			t.Fatalf("%q reads back as %q: %v", text, c.String(), err)
		}
		if again.String() != c.String() {
			t.Fatalf("%q: %q then %q", text, c.String(), again.String())
		}
		for _, f := range []Facts{{}, {Runs: 3}, {Runs: 3, Completed: true}} {
			if c.Holds(f) != again.Holds(f) {
				t.Fatalf("%q: holds differently with %+v", text, f)
			}
		}
	})
}

// FuzzParseCron: the parser never panics, and an expression it accepts
// names times after any instant that it recognizes as its own.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"*/5 * * * * * *", "0 9 * * mon-fri", "@every 90s/30s", "@weekly", "1-5/2,8 0 1,15 jan-mar 1-7/2 2030",
		"0 0 30 2 *", "* * * * * * 1999", "5/"} {
		f.Add(s, int64(0))
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expr string, offset int64) {
		c, err := ParseCron(expr)
		if err != nil {
			return
		}
		after := now.Add(time.Duration(offset % int64(20*365*24*time.Hour)))
		next := c.Next(after, paris)
		if next.IsZero() {
			return
		}
		if !next.After(after) {
			t.Fatalf("%q after %s: %s", expr, after, next)
		}
		if times := (Times{cron: c, loc: paris}); !times.Matches(next) {
			t.Fatalf("%q: %s is not its own", expr, next)
		}
	})
}
