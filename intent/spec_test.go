package intent

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func sampleTarget(t testing.TB) Target {
	t.Helper()
	data, err := os.ReadFile("../testdata/sample/dispatch.json")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := ParseTarget(data)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestParseTargetDetectsTheKind(t *testing.T) {
	tg := sampleTarget(t)
	if tg.Kind != TargetDispatch || tg.ID == "" || tg.Title == "" {
		t.Fatalf("dispatch: %+v", tg)
	}
	data, err := os.ReadFile("../testdata/runs/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	run, err := ParseTarget(data)
	if err != nil {
		t.Fatal(err)
	}
	if run.Kind != TargetRun || run.ID != "user-profiles" || run.String() != "run user-profiles" {
		t.Fatalf("run: %+v", run)
	}
	for in, want := range map[string]string{
		`[1]`:                        "dispatch plan",
		`{"title":"x","tasks":[]}`:   "run: tasks: empty",
		`{"taskId":"../x"}`:          "dispatch plan: taskId",
		`not json`:                   "dispatch plan: not valid JSON",
		`{"tasks":[{"id":"a"}]}`:     "title: required",
		`{"taskId":"T1","mode":"x"}`: "dispatch plan",
	} {
		if _, err := ParseTarget([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

func TestBuildDefaults(t *testing.T) {
	s, err := Build(Request{Name: "nightly", Target: sampleTarget(t), Cron: "0 2 * * *", HostZone: "Europe/Paris", DefaultOwner: "ana"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if s.TimeZone != "Europe/Paris" || s.Owner != "ana" || s.MaxRuns != DefaultMaxRunsCron || s.CatchUp != 1 ||
		s.Overflow != OverflowSkip || s.MaxErrors != 3 || s.MinInterval.D() != time.Minute || s.Until != nil {
		t.Fatalf("defaults: %+v", s)
	}
	once, err := Build(Request{Name: "once", Target: sampleTarget(t), RunAt: "+10m"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if once.TimeZone != "UTC" || once.Owner != DefaultOwner || once.MaxRuns != 1 || !once.RunAt.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("one-shot defaults: %+v", once)
	}
}

func TestBuildClampsRunAt(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	for in, want := range map[string]time.Time{
		"+1s":                       now.Add(time.Minute), // under the minimum interval
		"2020-01-01T00:00:00Z":      now.Add(time.Minute), // in the past
		"+2h":                       now.Add(2 * time.Hour),
		"2026-03-01 12:00":          time.Date(2026, 3, 1, 12, 0, 0, 0, paris),
		"2026-03-01T12:00:30":       time.Date(2026, 3, 1, 12, 0, 30, 0, paris),
		"2026-03-02T09:00:00+01:00": time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC),
		"+90.5s":                    now.Add(91 * time.Second), // to the next whole second
	} {
		s, err := Build(Request{Name: "x", Target: sampleTarget(t), RunAt: in, TimeZone: "Europe/Paris"}, now)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !s.RunAt.Equal(want) {
			t.Errorf("%s: got %s, want %s", in, s.RunAt, want)
		}
	}
}

func TestBuildErrorsNameTheirField(t *testing.T) {
	tg := sampleTarget(t)
	for _, c := range []struct {
		name string
		req  Request
		want []string
	}{
		{"both", Request{Name: "x", Target: tg, RunAt: "+1h", Cron: "@hourly"}, []string{"run_at: run_at and cron are mutually exclusive"}},
		{"neither", Request{Name: "x", Target: tg}, []string{"run_at: give run_at (one fire) or cron"}},
		{"bad cron", Request{Name: "x", Target: tg, Cron: "0 25 * * *"}, []string{"cron: hour: 25 is out of range 0-23"}},
		{"too often", Request{Name: "x", Target: tg, Cron: "*/10 * * * * * *"}, []string{"cron: \"*/10 * * * * * *\" fires 10s apart at times, more often than min_interval 1m0s"}},
		{"never", Request{Name: "x", Target: tg, Cron: "0 0 30 2 *"}, []string{"cron: \"0 0 30 2 *\" never fires"}},
		{"zone", Request{Name: "x", Target: tg, Cron: "@daily", TimeZone: "Mars/Olympus"}, []string{`time_zone: unknown time zone "Mars/Olympus"`}},
		{"local", Request{Name: "x", Target: tg, Cron: "@daily", TimeZone: "Local"}, []string{`time_zone: "Local" depends on the machine`}},
		{"zone with run_at", Request{Name: "x", Target: tg, RunAt: "2026-03-01 12:00", TimeZone: "Nowhere"}, []string{"time_zone: unknown"}},
		{"run_at text", Request{Name: "x", Target: tg, RunAt: "tomorrow"}, []string{`run_at: "tomorrow" is not a time`}},
		{"name", Request{Name: "Bad Name", Target: tg, Cron: "@daily"}, []string{`name: "Bad Name" must be`}},
		{"no name", Request{Target: tg, Cron: "@daily"}, []string{"name: required"}},
		{"no target", Request{Name: "x", Cron: "@daily"}, []string{"target: required"}},
		{"owner", Request{Name: "x", Target: tg, Cron: "@daily", Owner: "a b"}, []string{`owner: "a b" must be`}},
		{"max runs once", Request{Name: "x", Target: tg, RunAt: "+1h", MaxRuns: 3}, []string{"max_runs: 3: a run_at intent fires once"}},
		{"max runs", Request{Name: "x", Target: tg, Cron: "@daily", MaxRuns: -1}, []string{"max_runs: -1 must be between 1"}},
		{"catch up", Request{Name: "x", Target: tg, Cron: "@daily", CatchUp: 101}, []string{"catch_up: 101 must be between 1 and 100"}},
		{"overflow", Request{Name: "x", Target: tg, Cron: "@daily", Overflow: "later"}, []string{`overflow: "later" must be skip or defer`}},
		{"max errors", Request{Name: "x", Target: tg, Cron: "@daily", MaxErrors: -2}, []string{"max_errors: -2 must be between 1 and 100"}},
		{"interval", Request{Name: "x", Target: tg, Cron: "@daily", MinInterval: time.Millisecond}, []string{"min_interval: 1ms must be between 1s and 24h0m0s"}},
		{"until", Request{Name: "x", Target: tg, Cron: "@daily", Until: "done"}, []string{`until: at 1: unknown predicate "done"`}},
		{"several at once", Request{Name: "", Target: tg, Cron: "@daily", CatchUp: -1, Overflow: "x"}, []string{"name: required", "catch_up: -1", "overflow: \"x\""}},
	} {
		_, err := Build(c.req, now)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to contain %q", c.name, err, w)
			}
		}
		if c.name == "neither" && strings.Count(err.Error(), "run_at:") != 1 {
			t.Errorf("neither: reported more than once: %v", err)
		}
	}
}

func TestSpecRoundTripsThroughJSONAndRequest(t *testing.T) {
	s, err := Build(Request{Name: "weekly", Target: sampleTarget(t), Cron: "0 9 * * mon", TimeZone: "America/New_York",
		Until: "any_of(task_completed, runs>=4)", CatchUp: 2, Overflow: "defer", MinInterval: 90 * time.Second, MaxRuns: 7}, now)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"minInterval":"1m30s"`) {
		t.Fatalf("min interval reads as written: %s", data)
	}
	var back Spec
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(now); err != nil {
		t.Fatal(err)
	}
	again, err := Build(RequestFor(back), now)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(again)
	if string(a) != string(data) {
		t.Fatalf("rebuilt differs:\n%s\n%s", a, data)
	}
}

func TestCatchUpWindow(t *testing.T) {
	build := func(cron string, n int) Spec {
		s, err := Build(Request{Name: "x", Target: sampleTarget(t), Cron: cron, CatchUp: n, MinInterval: time.Second}, now)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		spec Spec
		want time.Duration
	}{
		{build("*/15 * * * * * *", 1), 15 * time.Second},
		{build("*/15 * * * * * *", 3), 45 * time.Second},
		{build("*/2 * * * * * *", 1), 10 * time.Second}, // the server's minimum
		{build("0 9 * * 1-5", 2), 48 * time.Hour},       // the shortest gap, not the weekend's
		{build("@every 1h", 5), 5 * time.Hour},
		{build("0 0 1 1 *", 100), 365 * 24 * time.Hour}, // capped
	} {
		if got := c.spec.CatchUpWindow(now); got != c.want {
			t.Errorf("%s x%d: %s, want %s", c.spec.Cron, c.spec.CatchUp, got, c.want)
		}
	}
	once, err := Build(Request{Name: "x", Target: sampleTarget(t), RunAt: "+1h"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := once.CatchUpWindow(now); got != OnceCatchUpWindow {
		t.Errorf("one-shot: %s", got)
	}
}

func TestQuota(t *testing.T) {
	q := Quota{PerOwner: 2, Global: 3}
	others := []Member{
		{Name: "a", Owner: "ana", Status: StatusActive},
		{Name: "b", Owner: "ana", Status: StatusPaused},
		{Name: "c", Owner: "bo", Status: StatusError},     // stopped: not counted
		{Name: "d", Owner: "bo", Status: StatusConverged}, // idem
	}
	if err := q.Admit(others, "new", "ana"); err == nil || !strings.Contains(err.Error(), "owner ana already has 2 active intents (at most 2 per owner)") {
		t.Fatalf("per owner: %v", err)
	}
	if err := q.Admit(others, "b", "ana"); err != nil {
		t.Fatalf("an intent is not counted against itself: %v", err)
	}
	if err := q.Admit(others, "new", "bo"); err != nil {
		t.Fatalf("bo: %v", err)
	}
	others = append(others, Member{Name: "e", Owner: "cy", Status: StatusActive})
	if err := q.Admit(others, "new", "bo"); err == nil || !strings.Contains(err.Error(), "3 intents are active (at most 3 in all)") {
		t.Fatalf("global: %v", err)
	}
}
