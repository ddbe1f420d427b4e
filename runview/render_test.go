package runview

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// -update rewrites testdata/*.golden from the code. Read every rewritten
// file before committing it: the goldens are what a person sees.
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the code")

type scenario struct {
	name string
	view func(t *testing.T) (View, time.Time)
	// check asserts what the scenario is about, so a golden rewritten
	// with a mistake in it still fails.
	check func(t *testing.T, out string)
}

var scenarios = []scenario{
	{"fresh", freshRun, func(t *testing.T, out string) {
		mustContain(t, out, "ready · not started · concurrency 2\n",
			"[--------------------]   0% · 0/6 done · 6 queued · $0.00",
			"e2e        queued  opus    -      -        -     -     waits for api, ui")
		mustNotContain(t, out, "warnings:", "blockers:", "summary:")
	}},
	{"diamond", runningDiamond, func(t *testing.T, out string) {
		mustContain(t, out, "active · started 2026-02-28 03:00:00 UTC · 12m30s so far · concurrency 2, 2 running",
			"50% · 3/6 done · 2 running, 1 queued · $2.01",
			"03:04:10->now 8m20s",
			"03:00:00->03:04:10 4m10s",
			"  1  [+] schema    -> api, ui",
			"  2  [>] api       -> e2e",
			"  3  [ ] e2e",
			"ui has used 1 of 3 loops on sonnet; last error: Phase test failed")
		mustNotContain(t, out, "blockers:", "summary:")
	}},
	{"stalled", stalledDiamond, func(t *testing.T, out string) {
		mustContain(t, out, "warnings:", "api stalled in phase implement: no event and no agent output since 03:07:00")
	}},
	{"cascade", failureCascade, func(t *testing.T, out string) {
		mustContain(t, out, "e2e   blocked",
			"blocked by base, auth",
			"  base failed: Phase test failed after 3 attempts",
			"    blocks api, web, docs, e2e",
			"    retry: starter run retry billing base",
			"    skip:  starter run skip billing base",
			"    retry: starter run retry billing auth",
			"    blocks e2e\n")
	}},
	{"paused", pausedRun, func(t *testing.T, out string) {
		mustContain(t, out, "paused · started",
			"lint paused (stall) at 03:13:00 after 2 loops on opus: it stalled and waits for a person",
			"sonnet->opus",
			"  lint paused (stall)\n    holds up changelog\n    retry: starter run retry user-profiles lint",
			"  the run is paused: no task starts until it resumes\n    resume: starter run resume user-profiles")
	}},
	{"rebase", rebaseConflict, func(t *testing.T, out string) {
		mustContain(t, out, "repo /srv/work/webapp · branch feature/user-profiles · status file ",
			"needs-human-rebase",
			"conflicts: src/profile/types.ts, src/profile/api.ts",
			"ui needs a human rebase: conflicts in src/profile/types.ts, src/profile/api.ts (worktree .worktrees/user-profiles/ui)",
			"src/profile/types.ts changed by schema, api, ui",
			"[!] ui")
	}},
	{"partial", finishedPartial, func(t *testing.T, out string) {
		mustContain(t, out, "partial · started 2026-02-28 03:00:00 UTC · ended 03:26:05 after 26m05s · concurrency 2\n",
			"summary: partial after 26 minutes\n  6 tasks: 3 successful, 1 failed, 1 skipped\n  4 loops, 1 model upgrade, $5.85",
			"not done: ui (failed), e2e (blocked by ui)",
			"$5.85 of a $5.00 budget (warn)\nBudget exceeded ($5.85 spent of $5.00) (budget action warn: the run goes on)\n",
			"    retry: starter run retry user-profiles ui\n    skip:  starter run skip user-profiles ui\n  the run has ended: a retry or skip reopens it where it ended")
		mustNotContain(t, out, "->now")
	}},
	{"big", bigRun, func(t *testing.T, out string) {
		if n := lines(out); n > 2*MaxRows+MaxGraphLevels+40 {
			t.Errorf("%d lines for 500 tasks", n)
		}
		for _, l := range strings.Split(out, "\n") {
			if width(l) > 200 {
				t.Errorf("line of %d characters: %q", width(l), l)
			}
		}
		mustContain(t, out, "dependencies (500 tasks in 50 levels",
			"... 20 more levels, 200 tasks",
			"l20-t3 failed",
			"    blocks l21-t2, l21-t3, l22-t1, l22-t2, l22-t3, l23-t0 +")
	}},
}

func TestGolden(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			v, now := sc.view(t)
			got := Render(v, Options{Now: now})
			path := filepath.Join("testdata", sc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("drawing differs from %s (run with -update to rewrite it):\n%s", path, got)
			}
			sc.check(t, got)
			if strings.Contains(got, "\x1b") {
				t.Error("escape codes without colours")
			}
		})
	}
}

// The same view drawn twice is the same text; only the clock moves the
// durations of what is still going on.
func TestRenderDependsOnItsArgumentsOnly(t *testing.T) {
	v, now := runningDiamond(t)
	a, b := Render(v, Options{Now: now}), Render(v, Options{Now: now})
	if a != b {
		t.Fatal("two drawings of one view differ")
	}
	later := Render(v, Options{Now: now.Add(time.Minute)})
	if !strings.Contains(later, "13m30s so far") || !strings.Contains(later, "03:04:10->now 9m20s") {
		t.Errorf("the clock did not reach the durations:\n%s", later)
	}
	if !strings.Contains(later, "03:00:00->03:04:10 4m10s") {
		t.Errorf("an ended task's duration moved with the clock:\n%s", later)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	local := Render(v, Options{Now: now, Location: paris})
	if !strings.Contains(local, "started 2026-02-28 04:00:00 CET") || !strings.Contains(local, "04:04:10->now") {
		t.Errorf("times not in the location given:\n%s", local)
	}
}

// Colours only when asked for, and the table still lines up: padding is
// counted on the text, not on the escape codes.
func TestColours(t *testing.T) {
	v, now := failureCascade(t)
	plain := Render(v, Options{Now: now})
	colored := Render(v, Options{Now: now, Color: true})
	for _, want := range []string{ansiRed + "failed" + ansiReset, ansiYellow + "running" + ansiReset, ansiRed + "[#]" + ansiReset, "▕"} {
		if !strings.Contains(colored, want) {
			t.Errorf("no %q in the coloured drawing", want)
		}
	}
	if stripped := stripANSI(colored); !sameLayout(stripped, plain) {
		t.Errorf("colours moved the text:\n%s\n---\n%s", stripped, plain)
	}
}

// sameLayout compares two drawings line by line, ignoring the bar.
func sameLayout(a, b string) bool {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(al) != len(bl) {
		return false
	}
	for i := range al {
		if strings.ContainsAny(al[i], "▕") {
			continue
		}
		if al[i] != bl[i] {
			return false
		}
	}
	return true
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// A view whose document lacks a task (it should never happen) still draws
// every task.
func TestRenderATaskMissingFromTheDocument(t *testing.T) {
	v, now := runningDiamond(t)
	delete(v.Status.Tasks, "e2e")
	out := Render(v, Options{Now: now})
	mustContain(t, out, "e2e        unknown", "[?] e2e")
}

func mustContain(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in\n%s", w, out)
		}
	}
}

func mustNotContain(t *testing.T, out string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(out, w) {
			t.Errorf("unexpected %q in\n%s", w, out)
		}
	}
}

// The operating guide shows the running diamond as this package draws it.
func TestOperatingGuideShowsTheDiamond(t *testing.T) {
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "diamond.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```\n"+string(golden)+"```\n") {
		t.Error("docs/operating.md's sample of `starter run status` is not testdata/diamond.golden: copy it over")
	}
}
