package runview

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
)

// t0 is when every fixture run is created.
var t0 = time.Date(2026, 2, 28, 3, 0, 0, 0, time.UTC)

// fixture drives a run's status document through runstatus's reducer, as
// the run workflow does, and keeps beside it what the workflow learns from
// each task's workflow (attempt, cost, last error), so a view drawn from it
// is a state a real run passes through.
type fixture struct {
	t     *testing.T
	run   runplan.Run
	s     runstatus.Status
	now   time.Time
	extra map[string]*TaskView
	view  View
}

func newFixture(t *testing.T, runFile []byte) *fixture {
	t.Helper()
	r, err := runplan.Parse(runFile)
	if err != nil {
		t.Fatalf("run file: %v", err)
	}
	f := &fixture{t: t, run: r, s: runstatus.New(r, t0), now: t0, extra: map[string]*TaskView{}}
	for _, task := range r.Tasks {
		f.extra[task.ID] = &TaskView{}
	}
	return f
}

func sampleFixture(t *testing.T) *fixture {
	t.Helper()
	data, err := os.ReadFile("../testdata/runs/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, data)
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// at moves the clock to d after t0.
func (f *fixture) at(d time.Duration) *fixture {
	f.now = t0.Add(d)
	return f
}

func (f *fixture) startRun() { f.must(f.s.Start(f.now)) }

// start starts tasks as the workflow does: only ones Ready offers, each on
// its document's model, as its next attempt.
func (f *fixture) start(ids ...string) {
	f.t.Helper()
	for _, id := range ids {
		f.must(f.s.TaskStarted(id, f.s.Tasks[id].Model, f.now))
		f.extra[id].Attempt++
	}
}

// done ends a task after loops attempts that cost cost in all.
func (f *fixture) done(id string, loops int, cost float64) {
	f.t.Helper()
	f.extra[id].CostUSD += cost
	f.extra[id].Attempt += loops - 1
	f.must(f.s.TaskEnded(id, runstatus.Done, loops, f.now))
}

func (f *fixture) fail(id, reason string, loops int, cost float64) {
	f.t.Helper()
	f.extra[id].CostUSD += cost
	f.extra[id].Attempt += loops - 1
	f.extra[id].LastError = reason
	f.must(f.s.TaskEnded(id, runstatus.Failed(reason), loops, f.now))
}

// looped records an attempt of a running task that ended without the
// task being done: the workflow counts the loop at once, and starts the
// next attempt while the task has loops left.
func (f *fixture) looped(id, lastError string, cost float64) {
	f.t.Helper()
	if f.s.Tasks[id].Status != runstatus.TaskRunning {
		f.t.Fatalf("looped: %s is %s", id, f.s.Tasks[id].Status)
	}
	f.s.Tasks[id].LoopCount++
	f.extra[id].CostUSD += cost
	f.extra[id].LastError = lastError
	left, err := f.s.LoopsLeft(id)
	f.must(err)
	if left > 0 {
		f.extra[id].Attempt++
	}
}

// stalled applies the loop limit to a task that has used its loops.
func (f *fixture) stalled(id string, want runstatus.Escalation) {
	f.t.Helper()
	esc, err := f.s.LoopLimitReached(id, 0, f.now)
	f.must(err)
	if esc != want {
		f.t.Fatalf("%s stalled: %s, want %s", id, esc, want)
	}
}

// View is what the run workflow's view query answers, after the trip
// through JSON a query makes.
func (f *fixture) View() View {
	f.t.Helper()
	v := f.view
	v.Slug, v.Title, v.Concurrency = f.run.Slug, f.run.Title, f.run.Concurrency
	v.Status = f.s.Clone()
	v.Tasks = nil
	v.Running = 0
	for _, task := range f.run.Tasks {
		tv := *f.extra[task.ID]
		tv.ID, tv.Title, tv.Depends = task.ID, task.Title, task.Depends
		tv.WorkflowID = "karvi-task-" + task.ID
		v.Tasks = append(v.Tasks, tv)
		if f.s.Tasks[task.ID].Status == runstatus.TaskRunning {
			v.Running++
		}
	}
	v.UpdatedAt = f.now
	data, err := json.Marshal(v)
	if err != nil {
		f.t.Fatal(err)
	}
	var out View
	if err := json.Unmarshal(data, &out); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// The scenarios of the goldens. Each returns the view and the moment it is
// drawn at.

func freshRun(t *testing.T) (View, time.Time) {
	f := sampleFixture(t)
	return f.View(), t0.Add(5 * time.Second)
}

// runningDiamond: schema done, api and ui running (ui on its second
// attempt), e2e waiting for both; lint and changelog done on the side.
func runningDiamond(t *testing.T) (View, time.Time) {
	f := sampleFixture(t)
	f.startRun()
	f.start("schema", "lint")
	f.at(3*time.Minute).done("lint", 1, 0.40)
	f.start("changelog")
	f.at(4*time.Minute+10*time.Second).done("schema", 1, 0.85)
	f.start("api")
	f.at(5*time.Minute).done("changelog", 1, 0.12)
	f.start("ui")
	f.at(9*time.Minute+40*time.Second).looped("ui", "Phase test failed: cmd `npm test` exited 1", 0.64)
	return f.View(), t0.Add(12*time.Minute + 30*time.Second)
}

// stalledDiamond: runningDiamond whose api has shown no progress since
// 03:07:00.
func stalledDiamond(t *testing.T) (View, time.Time) {
	f := sampleFixture(t)
	f.startRun()
	f.start("schema", "lint")
	f.at(3*time.Minute).done("lint", 1, 0.40)
	f.start("changelog")
	f.at(4*time.Minute+10*time.Second).done("schema", 1, 0.85)
	f.start("api")
	f.must(f.s.StallTask("api", "implement", t0.Add(7*time.Minute)))
	f.at(5*time.Minute).done("changelog", 1, 0.12)
	return f.View(), t0.Add(12*time.Minute + 30*time.Second)
}

const cascadeRun = `{
  "title": "Billing",
  "slug": "billing",
  "concurrency": 3,
  "tasks": [
    {"id": "base", "title": "Billing tables"},
    {"id": "auth", "title": "Payment provider auth"},
    {"id": "api", "title": "Billing API", "depends": ["base"]},
    {"id": "web", "title": "Billing page", "depends": ["api"]},
    {"id": "docs", "title": "Billing docs", "depends": ["base"]},
    {"id": "e2e", "title": "Billing end-to-end", "depends": ["web", "docs", "auth"]},
    {"id": "tool", "title": "Invoice CLI"}
  ]
}`

// failureCascade: base and auth failed; everything downstream is blocked,
// e2e by both; tool still runs.
func failureCascade(t *testing.T) (View, time.Time) {
	f := newFixture(t, []byte(cascadeRun))
	f.startRun()
	f.start("base", "auth", "tool")
	f.at(6*time.Minute).fail("base", "Phase test failed after 3 attempts: check failed: cmd `go test ./...` exited 1", 1, 1.10)
	f.at(7*time.Minute).fail("auth", "Conductor crashed: conductor exited while phase implement was running, leaving the plan running; stderr: out of memory (exit code 137)", 1, 0.35)
	return f.View(), t0.Add(8 * time.Minute)
}

// pausedRun: lint stalled on sonnet, was upgraded to opus, stalled again
// and went to a person; then the operator paused the run with api and ui
// running.
func pausedRun(t *testing.T) (View, time.Time) {
	f := sampleFixture(t)
	f.startRun()
	f.start("schema", "lint")
	for i := range 3 {
		f.at(time.Duration(i+1)*time.Minute).looped("lint", "Phase test failed: cmd `golangci-lint run` exited 1", 0.30)
	}
	f.stalled("lint", runstatus.Upgraded)
	f.start("lint")
	f.at(4*time.Minute).done("schema", 1, 0.85)
	f.start("api")
	f.at(9*time.Minute).looped("lint", "Phase test failed: cmd `golangci-lint run` exited 1", 0.90)
	f.at(13*time.Minute).looped("lint", "Phase test failed: cmd `golangci-lint run` exited 2", 0.95)
	f.stalled("lint", runstatus.ToPerson)
	f.start("ui")
	f.at(13*time.Minute + 30*time.Second).must(f.s.Pause())
	return f.View(), t0.Add(14 * time.Minute)
}

// rebaseConflict: a run in a repository; ui could not be merged into the
// feature branch and waits for a person to rebase it; api and ui changed
// the same files.
func rebaseConflict(t *testing.T) (View, time.Time) {
	f := sampleFixture(t)
	f.view.Repo = "/srv/work/webapp"
	f.view.StatusFile = "/srv/work/webapp/.karimo/prds/user-profiles/status.json"
	f.s.FeatureBranch = "feature/user-profiles"
	f.startRun()
	f.start("schema", "lint")
	f.at(3*time.Minute).done("lint", 1, 0.40)
	f.start("changelog")
	f.at(4*time.Minute).done("schema", 1, 0.85)
	f.start("api")
	f.at(5*time.Minute).done("changelog", 1, 0.12)
	f.start("ui")
	f.at(11*time.Minute).done("api", 1, 1.30)
	f.at(12*time.Minute).done("ui", 1, 0.95)
	// Merging ui's branch into the feature branch conflicted: the workflow
	// records it on the task (the reducer leaves this state to its owner).
	ui := f.s.Tasks["ui"]
	ui.Status = runstatus.TaskNeedsHumanRebase
	ui.ConflictAt = f.now.Add(20 * time.Second)
	ui.ConflictFiles = []string{"src/profile/types.ts", "src/profile/api.ts"}
	ui.Branch = "feature/user-profiles-ui"
	ui.Worktree = ".worktrees/user-profiles/ui"
	f.view.Overlaps = []Overlap{
		{Path: "src/profile/api.ts", Tasks: []string{"api", "ui"}},
		{Path: "src/profile/types.ts", Tasks: []string{"schema", "api", "ui"}},
	}
	return f.View(), t0.Add(13 * time.Minute)
}

// finishedPartial: lint needed an upgrade to opus, ui failed so e2e never
// ran, changelog was skipped by the operator; the run ended partial.
func finishedPartial(t *testing.T) (View, time.Time) {
	f := sampleFixture(t)
	f.startRun()
	f.start("schema", "lint")
	f.at(2 * time.Minute).must(f.s.Skip("changelog"))
	f.at(4*time.Minute).done("schema", 1, 0.85)
	f.start("api")
	for i := range 3 {
		f.at(time.Duration(5+2*i)*time.Minute).looped("lint", "Phase test failed: cmd `golangci-lint run` exited 1", 0.30)
	}
	f.stalled("lint", runstatus.Upgraded)
	f.start("ui")
	f.at(15*time.Minute).done("api", 1, 1.30)
	f.start("lint")
	f.at(21*time.Minute).fail("ui", "Phase test failed after 3 attempts: check failed: cmd `npm test` exited 1", 1, 1.75)
	f.at(26*time.Minute).done("lint", 1, 1.05)
	if !f.s.Finished() {
		t.Fatalf("not finished: ready %v", f.s.Ready())
	}
	f.at(26*time.Minute + 5*time.Second)
	f.must(f.s.Complete(f.now))
	v := f.View()
	v.Budget = &costs.Budget{LimitUSD: 5, Action: costs.Warn}
	v.SpentUSD = 5.85
	v.BudgetNote = "Budget exceeded ($5.85 spent of $5.00) (budget action warn: the run goes on)"
	return v, t0.Add(40 * time.Minute)
}

// bigRun is 500 tasks in 50 levels of 10, each depending on two tasks of
// the level above; run at concurrency 20 until 230 tasks have ended, one
// of them failed, which blocks much of what lies below it.
func bigRun(t *testing.T) (View, time.Time) {
	const levels, perLevel = 50, 10
	type taskFile struct {
		ID      string   `json:"id"`
		Title   string   `json:"title"`
		Depends []string `json:"depends,omitempty"`
	}
	id := func(l, i int) string { return fmt.Sprintf("l%02d-t%d", l, i) }
	var tasks []taskFile
	for l := 1; l <= levels; l++ {
		for i := range perLevel {
			tf := taskFile{ID: id(l, i), Title: fmt.Sprintf("Task %d of level %d", i, l)}
			if l > 1 {
				tf.Depends = []string{id(l-1, i), id(l-1, (i+1)%perLevel)}
			}
			tasks = append(tasks, tf)
		}
	}
	data, err := json.Marshal(map[string]any{"title": "Big migration", "slug": "big-migration", "concurrency": 20, "tasks": tasks})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, data)
	f.startRun()
	var running []string
	ended := 0
	for step := 0; ended < 230; step++ {
		for _, r := range f.s.Ready() {
			if len(running) == f.run.Concurrency {
				break
			}
			f.start(r)
			running = append(running, r)
		}
		if len(running) == 0 {
			t.Fatalf("stuck after %d tasks", ended)
		}
		f.at(time.Duration(step+1) * 20 * time.Second)
		next := running[0]
		running = running[1:]
		if next == id(20, 3) {
			f.fail(next, "Phase implement failed: agent gave up", 1, 0.5)
		} else {
			f.done(next, 1, 0.25)
		}
		ended++
	}
	for _, r := range f.s.Ready() {
		if len(running) < f.run.Concurrency {
			f.start(r)
			running = append(running, r)
		}
	}
	return f.View(), f.now.Add(10 * time.Second)
}

// lines counts the lines of a drawing.
func lines(s string) int { return strings.Count(s, "\n") }
