package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runview"
)

var t0 = time.Date(2026, 2, 28, 3, 0, 0, 0, time.UTC)

func statusAt(phase, phaseStatus string, done int, cost float64) taskapi.Status {
	return taskapi.Status{TaskID: "T5", Stage: taskapi.StageRunning, Attempt: 1, PlanName: "karvi-t5-020d01",
		CurrentPhase: phase, PhaseStatus: phaseStatus, CompletedPhases: done, TotalPhases: 3,
		CostUSD: cost, TaskStatus: mapping.TaskInProgress, StartedAt: t0}
}

func TestProgressLines(t *testing.T) {
	cases := []struct {
		name string
		s    taskapi.Status
		at   time.Duration
		want string
	}{
		{"before any phase", taskapi.Status{Stage: taskapi.StagePrepare, Attempt: 1, StartedAt: t0}, 0,
			"00:00 [--------------------] 0/0 preparing the plan · attempt 1 · $0.00"},
		{"first phase running", statusAt("implement", "running", 0, 0), 1500 * time.Millisecond,
			"00:01 [--------------------] 0/3 implement running · attempt 1 · $0.00 · in_progress"},
		{"a third done", statusAt("test", "running", 1, 0.85), 2*time.Minute + 5*time.Second,
			"02:05 [######--------------] 1/3 test running · attempt 1 · $0.85 · in_progress"},
		{"all done, past an hour", statusAt("docs", "passed", 3, 1.45), time.Hour + 4*time.Minute + 15*time.Second,
			"1:04:15 [####################] 3/3 docs passed · attempt 1 · $1.45 · in_progress"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := progressOf(c.s, t0.Add(c.at)).line(false)
			if got != c.want {
				t.Errorf("\n got %q\nwant %q", got, c.want)
			}
		})
	}
	s := statusAt("test", "failed", 1, 0.85)
	s.SinkProblem = "no brief for this task"
	if got := progressOf(s, t0).line(false); !strings.HasSuffix(got, " · sink problem: no brief for this task") {
		t.Errorf("sink problem not shown: %q", got)
	}
}

// Colours only where asked for; a pipe or a file gets plain text.
func TestProgressColoursOnlyOnATerminal(t *testing.T) {
	p := progressOf(statusAt("test", "failed", 1, 0.85), t0.Add(time.Second))
	plain, colored := p.line(false), p.line(true)
	if strings.Contains(plain, "\x1b") {
		t.Errorf("plain line has escape codes: %q", plain)
	}
	if !strings.Contains(colored, ansiRed+"failed"+ansiReset) || !strings.Contains(colored, "█") {
		t.Errorf("terminal line not coloured: %q", colored)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if o := followOptionsFor(f, false); o.Color || o.JSON {
		t.Errorf("a file is not a terminal: %+v", o)
	}
	if o := followOptionsFor(&bytes.Buffer{}, true); o.Color || !o.JSON {
		t.Errorf("json: %+v", o)
	}
}

// Only a change prints a line: the clock moving alone does not.
func TestProgressChangeIgnoresTheClock(t *testing.T) {
	a := progressOf(statusAt("test", "running", 1, 0.85), t0.Add(time.Second))
	b := progressOf(statusAt("test", "running", 1, 0.85), t0.Add(time.Minute))
	if !a.sameAs(b) {
		t.Error("elapsed time alone counted as a change")
	}
	for _, c := range []taskapi.Status{
		statusAt("test", "failed", 1, 0.85),
		statusAt("test", "running", 2, 0.85),
		statusAt("test", "running", 1, 0.86),
		statusAt("docs", "running", 1, 0.85),
	} {
		if a.sameAs(progressOf(c, t0)) {
			t.Errorf("change not seen: %+v", c)
		}
	}
}

func TestFollowJSONIsOneObjectPerChange(t *testing.T) {
	var out bytes.Buffer
	o := followOptions{JSON: true}
	if err := o.print(&out, progressOf(statusAt("test", "running", 1, 0.85), t0.Add(12*time.Second))); err != nil {
		t.Fatal(err)
	}
	if err := o.print(&out, summaryOf(taskapi.Result{TaskID: "T5"}, t0)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), out.String())
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &p); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"elapsedMs": 12000.0, "attempt": 1.0, "stage": "running", "plan": "karvi-t5-020d01",
		"phase": "test", "phaseStatus": "running", "phasesDone": 1.0, "phasesTotal": 3.0, "costUsd": 0.85,
		"taskStatus": "in_progress"}
	if len(p) != len(want) {
		t.Errorf("progress object %v, want %v", p, want)
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %v, want %v", k, p[k], v)
		}
	}
	var end map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &end); err != nil || end["final"] != true {
		t.Errorf("final object %s: %v", lines[1], err)
	}
}

func TestFinalSummary(t *testing.T) {
	cost := func(f float64) *float64 { return &f }
	res := taskapi.Result{
		TaskID: "T5", Attempt: 2, PlanName: "karvi-t5-020d01-r2",
		Outcome: mapping.Outcome{TaskStatus: mapping.TaskBlocked, LastError: "Phase docs timed out"},
		Brief:   mapping.Brief{CompletedPhases: 2, Plan: mapping.BriefPlan{TotalPhases: 3}},
		Attempts: []taskapi.AttemptSummary{
			{Attempt: 1, StartedAt: t0, EndedAt: t0.Add(time.Minute), CostUSD: cost(0.85)},
			{Attempt: 2, StartedAt: t0.Add(time.Minute), EndedAt: t0.Add(4*time.Minute + 15*time.Second), CostUSD: cost(1.27)},
		},
	}
	s := summaryOf(res, t0.Add(time.Hour))
	want := "task T5 blocked in 4m15s · 2/3 phases · $2.12 · attempt 2 · plan karvi-t5-020d01-r2: Phase docs timed out"
	if got := s.line(false); got != want {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
	if got := s.line(true); !strings.Contains(got, ansiRed+"blocked"+ansiReset) {
		t.Errorf("coloured summary %q", got)
	}

	// A result without attempt records (an older workflow) costs what its
	// brief says.
	total := 1.45
	old := taskapi.Result{TaskID: "T5", Outcome: mapping.Outcome{TaskStatus: mapping.TaskCompleted},
		Brief: mapping.Brief{Cost: mapping.BriefCost{TotalUSD: &total}}}
	if got := summaryOf(old, t0).CostUSD; got != 1.45 {
		t.Errorf("cost %v", got)
	}
}

func TestBarAndClock(t *testing.T) {
	for _, c := range []struct {
		done, total int
		want        string
	}{
		{0, 0, "[--------------------]"},
		{1, 3, "[######--------------]"},
		{2, 3, "[#############-------]"},
		{5, 3, "[####################]"},
	} {
		if got := runview.Bar(c.done, c.total, false); got != c.want {
			t.Errorf("bar(%d, %d) = %q, want %q", c.done, c.total, got, c.want)
		}
	}
	for d, want := range map[time.Duration]string{850 * time.Millisecond: "850ms", 4665 * time.Millisecond: "4.7s",
		125*time.Second + 400*time.Millisecond: "2m5s"} {
		if got := roundDuration(d); got != want {
			t.Errorf("roundDuration(%s) = %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{0: "00:00", 59*time.Second + 999*time.Millisecond: "00:59",
		61 * time.Minute: "1:01:00"} {
		if got := clock(d); got != want {
			t.Errorf("clock(%s) = %q, want %q", d, got, want)
		}
	}
}
