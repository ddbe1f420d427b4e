package runstatus

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"karvi-edda-temporal/runplan"
)

// testRun is a diamond (a before b and c, both before d) and an
// independent e. b is rated for opus, the rest run on sonnet.
const testRun = `{"title":"Profiles","slug":"profiles","tasks":[
 {"id":"a","title":"A"},
 {"id":"b","title":"B","depends":["a"],"complexity":6},
 {"id":"c","title":"C","depends":["a"]},
 {"id":"d","title":"D","depends":["b","c"]},
 {"id":"e","title":"E"}]}`

var t0 = time.Date(2026, 2, 19, 10, 0, 0, 0, time.UTC)

func parseRun(t testing.TB, data string) runplan.Run {
	t.Helper()
	r, err := runplan.Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// op is one call of the reducer; min is the minute after t0 it happens at.
type op struct {
	name string
	do   func(s *Status, at time.Time) error
}

func start() op {
	return op{"start", func(s *Status, at time.Time) error { return s.Start(at) }}
}
func run(id string) op {
	return op{"run " + id, func(s *Status, at time.Time) error { return s.TaskStarted(id, "", at) }}
}
func done(id string, loops int) op {
	return op{"done " + id, func(s *Status, at time.Time) error { return s.TaskEnded(id, Done, loops, at) }}
}
func fail(id string, loops int) op {
	return op{"fail " + id, func(s *Status, at time.Time) error { return s.TaskEnded(id, Failed("boom "+id), loops, at) }}
}
func stall(id string, loops int, want Escalation) op {
	return op{"stall " + id, func(s *Status, at time.Time) error {
		got, err := s.LoopLimitReached(id, loops, at)
		if err == nil && got != want {
			return fmt.Errorf("escalation %q, want %q", got, want)
		}
		return err
	}}
}
func skip(id string) op {
	return op{"skip " + id, func(s *Status, _ time.Time) error { return s.Skip(id) }}
}
func retry(id string) op {
	return op{"retry " + id, func(s *Status, _ time.Time) error { return s.Retry(id) }}
}
func worktree(id string) op {
	return op{"worktree " + id, func(s *Status, at time.Time) error {
		return s.WorktreeCreated(id, "feature/profiles-"+id, ".worktrees/profiles/"+id, at)
	}}
}
func merged(id string, loops int) op {
	return op{"merged " + id, func(s *Status, at time.Time) error { return s.TaskEnded(id, Merged, loops, at) }}
}
func conflict(id string, loops int, files ...string) op {
	return op{"conflict " + id, func(s *Status, at time.Time) error { return s.TaskEnded(id, Conflict(files), loops, at) }}
}
func retryMerge(id string) op {
	return op{"retry merge " + id, func(s *Status, _ time.Time) error { return s.RetryMerge(id) }}
}
func cleaned(id string) op {
	return op{"cleaned " + id, func(s *Status, _ time.Time) error { return s.WorktreeRemoved(id) }}
}
func pause() op  { return op{"pause", func(s *Status, _ time.Time) error { return s.Pause() }} }
func resume() op { return op{"resume", func(s *Status, _ time.Time) error { return s.Resume() }} }
func abort() op {
	return op{"abort", func(s *Status, at time.Time) error { return s.Abort(at) }}
}
func complete() op {
	return op{"complete", func(s *Status, at time.Time) error { return s.Complete(at) }}
}

// render writes the tasks in run order: id:status, the blocking tasks in
// brackets, the conflicting files in parentheses, the loop count, the
// worktree's state after an @.
func render(s *Status) string {
	var parts []string
	for _, rt := range s.run.Tasks {
		t := s.Tasks[rt.ID]
		p := rt.ID + ":" + string(t.Status)
		if len(t.BlockedBy) > 0 {
			p += "[" + strings.Join(t.BlockedBy, ",") + "]"
		}
		if len(t.ConflictFiles) > 0 {
			p += "(" + strings.Join(t.ConflictFiles, ",") + ")"
		}
		if t.LoopCount > 0 {
			p += fmt.Sprintf("/%d", t.LoopCount)
		}
		if t.WorktreeStatus != "" {
			p += "@" + string(t.WorktreeStatus)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// apply runs ops one minute apart; every op but the last must succeed.
func apply(t *testing.T, ops []op) (Status, error) {
	t.Helper()
	s := New(parseRun(t, testRun), t0)
	var err error
	for i, o := range ops {
		err = o.do(&s, t0.Add(time.Duration(i+1)*time.Minute))
		if err != nil && i < len(ops)-1 {
			t.Fatalf("op %d (%s): %v", i, o.name, err)
		}
	}
	return s, err
}

func TestTransitions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ops   []op
		run   RunState
		tasks string
		ready []string
	}{
		{"new", nil, RunReady,
			"a:queued b:queued c:queued d:queued e:queued", nil},
		{"start", []op{start()}, RunActive,
			"a:queued b:queued c:queued d:queued e:queued", []string{"a", "e"}},
		{"task started", []op{start(), run("a")}, RunActive,
			"a:running b:queued c:queued d:queued e:queued", []string{"e"}},
		{"done frees dependents", []op{start(), run("a"), done("a", 2)}, RunActive,
			"a:done/2 b:queued c:queued d:queued e:queued", []string{"b", "c", "e"}},
		{"failure blocks dependents transitively", []op{start(), run("a"), fail("a", 1)}, RunActive,
			"a:failed/1 b:blocked[a] c:blocked[a] d:blocked[a] e:queued", []string{"e"}},
		{"blocked_by names every failed task upstream", []op{start(), run("a"), done("a", 1), run("b"), run("c"), fail("c", 1), fail("b", 1)}, RunActive,
			"a:done/1 b:failed/1 c:failed/1 d:blocked[b,c] e:queued", []string{"e"}},
		{"one failure upstream, one still running", []op{start(), run("a"), done("a", 1), run("b"), run("c"), fail("c", 1)}, RunActive,
			"a:done/1 b:running c:failed/1 d:blocked[c] e:queued", []string{"e"}},
		{"skip a failed task unblocks as done would", []op{start(), run("a"), fail("a", 1), skip("a")}, RunActive,
			"a:skipped/1 b:queued c:queued d:queued e:queued", []string{"b", "c", "e"}},
		{"skip a blocked task frees its dependents of the failure", []op{start(), run("a"), done("a", 1), run("b"), fail("b", 1), skip("b")}, RunActive,
			"a:done/1 b:skipped/1 c:queued d:queued e:queued", []string{"c", "e"}},
		{"skip a queued task", []op{skip("a"), start()}, RunActive,
			"a:skipped b:queued c:queued d:queued e:queued", []string{"b", "c", "e"}},
		{"retry requeues and unblocks", []op{start(), run("a"), fail("a", 2), retry("a")}, RunActive,
			"a:queued b:queued c:queued d:queued e:queued", []string{"a", "e"}},
		{"retry one of two failures", []op{start(), run("a"), done("a", 1), run("b"), run("c"), fail("c", 1), fail("b", 1), retry("b")}, RunActive,
			"a:done/1 b:queued c:failed/1 d:blocked[c] e:queued", []string{"b", "e"}},
		{"pause empties ready", []op{start(), pause()}, RunPaused,
			"a:queued b:queued c:queued d:queued e:queued", nil},
		{"running task ends while paused", []op{start(), run("a"), pause(), done("a", 1)}, RunPaused,
			"a:done/1 b:queued c:queued d:queued e:queued", nil},
		{"resume", []op{start(), pause(), resume()}, RunActive,
			"a:queued b:queued c:queued d:queued e:queued", []string{"a", "e"}},
		{"stall on sonnet upgrades to opus", []op{start(), run("a"), stall("a", 3, Upgraded)}, RunActive,
			"a:queued b:queued c:queued d:queued e:queued", []string{"a", "e"}},
		{"stall after the upgrade goes to a person", []op{start(), run("a"), stall("a", 3, Upgraded), run("a"), stall("a", 2, ToPerson)}, RunActive,
			"a:paused/2 b:queued c:queued d:queued e:queued", []string{"e"}},
		{"stall on opus goes to a person", []op{start(), run("a"), done("a", 1), run("b"), stall("b", 3, ToPerson)}, RunActive,
			"a:done/1 b:paused/3 c:queued d:queued e:queued", []string{"c", "e"}},
		{"retry a task a person took", []op{start(), run("a"), done("a", 1), run("b"), stall("b", 3, ToPerson), retry("b")}, RunActive,
			"a:done/1 b:queued c:queued d:queued e:queued", []string{"b", "c", "e"}},
		{"abort fails running tasks", []op{start(), run("a"), run("e"), abort()}, RunPartial,
			"a:failed b:blocked[a] c:blocked[a] d:blocked[a] e:failed", nil},
		{"complete", []op{start(), run("a"), run("e"), done("a", 1), done("e", 1), run("b"), run("c"), done("b", 1), done("c", 1), run("d"), done("d", 1), complete()}, RunComplete,
			"a:done/1 b:done/1 c:done/1 d:done/1 e:done/1", nil},
		{"complete with skips", []op{start(), run("a"), fail("a", 1), skip("a"), skip("b"), skip("c"), skip("d"), skip("e"), complete()}, RunComplete,
			"a:skipped/1 b:skipped c:skipped d:skipped e:skipped", nil},
		{"partial", []op{start(), run("a"), fail("a", 1), run("e"), done("e", 1), complete()}, RunPartial,
			"a:failed/1 b:blocked[a] c:blocked[a] d:blocked[a] e:done/1", nil},
		{"worktree of a running task", []op{start(), run("a"), worktree("a")}, RunActive,
			"a:running@active b:queued c:queued d:queued e:queued", []string{"e"}},
		{"worktree made before the start", []op{start(), worktree("a"), run("a"), worktree("a")}, RunActive,
			"a:running@active b:queued c:queued d:queued e:queued", []string{"e"}},
		{"merged frees dependents", []op{start(), run("a"), worktree("a"), merged("a", 2)}, RunActive,
			"a:done/2@pending-cleanup b:queued c:queued d:queued e:queued", []string{"b", "c", "e"}},
		{"merged then cleaned", []op{start(), run("a"), worktree("a"), merged("a", 2), cleaned("a")}, RunActive,
			"a:done/2@cleaned b:queued c:queued d:queued e:queued", []string{"b", "c", "e"}},
		{"conflict keeps dependents waiting", []op{start(), run("a"), worktree("a"), conflict("a", 1, "README", "src/a.go")}, RunActive,
			"a:needs-human-rebase(README,src/a.go)/1@active b:queued c:queued d:queued e:queued", []string{"e"}},
		{"conflict of one of two dependencies", []op{start(), run("a"), worktree("a"), merged("a", 1), run("b"), worktree("b"), run("c"), worktree("c"), merged("b", 1), conflict("c", 1, "x")}, RunActive,
			"a:done/1@pending-cleanup b:done/1@pending-cleanup c:needs-human-rebase(x)/1@active d:queued e:queued", []string{"e"}},
		{"retry merge runs for the merge only", []op{start(), run("a"), worktree("a"), conflict("a", 1, "README"), retryMerge("a")}, RunActive,
			"a:running/1@active b:queued c:queued d:queued e:queued", []string{"e"}},
		{"merge after the rebase", []op{start(), run("a"), worktree("a"), conflict("a", 1, "README"), retryMerge("a"), merged("a", 0)}, RunActive,
			"a:done/1@pending-cleanup b:queued c:queued d:queued e:queued", []string{"b", "c", "e"}},
		{"conflict again after the rebase", []op{start(), run("a"), worktree("a"), conflict("a", 1, "README"), retryMerge("a"), conflict("a", 0, "src/a.go")}, RunActive,
			"a:needs-human-rebase(src/a.go)/1@active b:queued c:queued d:queued e:queued", []string{"e"}},
		{"retry merge while paused", []op{start(), run("a"), worktree("a"), conflict("a", 1, "README"), pause(), retryMerge("a")}, RunPaused,
			"a:running/1@active b:queued c:queued d:queued e:queued", nil},
		{"skip a conflicted task releases its dependents", []op{start(), run("a"), worktree("a"), conflict("a", 1, "README"), skip("a")}, RunActive,
			"a:skipped(README)/1@active b:queued c:queued d:queued e:queued", []string{"b", "c", "e"}},
		{"a failed task keeps its worktree", []op{start(), run("a"), worktree("a"), fail("a", 1)}, RunActive,
			"a:failed/1@active b:blocked[a] c:blocked[a] d:blocked[a] e:queued", []string{"e"}},
		{"a retried task keeps its worktree", []op{start(), run("a"), worktree("a"), fail("a", 1), retry("a"), worktree("a"), run("a")}, RunActive,
			"a:running@active b:queued c:queued d:queued e:queued", []string{"e"}},
		{"a failed task's worktree cleaned by hand", []op{start(), run("a"), worktree("a"), fail("a", 1), cleaned("a"), retry("a"), worktree("a")}, RunActive,
			"a:queued@active b:queued c:queued d:queued e:queued", []string{"a", "e"}},
		{"a conflict left at the end is partial", []op{start(), run("a"), worktree("a"), conflict("a", 1, "x"), run("e"), done("e", 1), complete()}, RunPartial,
			"a:needs-human-rebase(x)/1@active b:queued c:queued d:queued e:done/1", nil},
		{"abort during the merge retry", []op{start(), run("a"), worktree("a"), conflict("a", 1, "x"), retryMerge("a"), abort()}, RunPartial,
			"a:failed/1@active b:blocked[a] c:blocked[a] d:blocked[a] e:queued", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := apply(t, tc.ops)
			if err != nil {
				t.Fatalf("last op: %v", err)
			}
			if s.Status != tc.run {
				t.Errorf("run %s, want %s", s.Status, tc.run)
			}
			if got := render(&s); got != tc.tasks {
				t.Errorf("tasks\n got %s\nwant %s", got, tc.tasks)
			}
			if got := s.Ready(); !slices.Equal(got, tc.ready) {
				t.Errorf("ready %v, want %v", got, tc.ready)
			}
			checkInvariants(t, &s)
		})
	}
}

func TestInvalidCalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []op
		want string // in the error, besides the task named by name's last word
		is   error
	}{
		{"unknown task started", []op{start(), run("zz")}, "task zz: unknown task", ErrUnknownTask},
		{"unknown task ended", []op{start(), done("zz", 1)}, "task zz: unknown task", ErrUnknownTask},
		{"unknown task stalled", []op{start(), stall("zz", 3, Upgraded)}, "task zz: unknown task", ErrUnknownTask},
		{"unknown task skipped", []op{skip("zz")}, "task zz: unknown task", ErrUnknownTask},
		{"unknown task retried", []op{retry("zz")}, "task zz: unknown task", ErrUnknownTask},
		{"end a queued task", []op{start(), done("a", 1)}, "task a: cannot end: it is queued", ErrTransition},
		{"end a task twice", []op{start(), run("a"), done("a", 1), fail("a", 1)}, "task a: cannot end: it is done", ErrTransition},
		{"start before the run", []op{run("a")}, "task a: cannot start: run profiles is ready", ErrTransition},
		{"start while paused", []op{start(), pause(), run("a")}, "task a: cannot start: run profiles is paused", ErrTransition},
		{"start before dependencies", []op{start(), run("b")}, "task b: cannot start: waits for a", ErrTransition},
		{"start a blocked task", []op{start(), run("a"), fail("a", 1), run("b")}, "task b: cannot start: it is blocked", ErrTransition},
		{"start twice", []op{start(), run("a"), run("a")}, "task a: cannot start: it is running", ErrTransition},
		{"start the run twice", []op{start(), start()}, "run profiles: cannot start: it is active", ErrTransition},
		{"pause a ready run", []op{pause()}, "run profiles: cannot pause: it is ready", ErrTransition},
		{"resume an active run", []op{start(), resume()}, "run profiles: cannot resume: it is active", ErrTransition},
		{"skip a running task", []op{start(), run("a"), skip("a")}, "task a: cannot skip: it is running", ErrTransition},
		{"skip a done task", []op{start(), run("a"), done("a", 1), skip("a")}, "task a: cannot skip: it is done", ErrTransition},
		{"retry a queued task", []op{retry("a")}, "task a: cannot retry: it is queued", ErrTransition},
		{"retry a done task", []op{start(), run("a"), done("a", 1), retry("a")}, "task a: cannot retry: it is done", ErrTransition},
		{"stall a queued task", []op{start(), stall("a", 3, Upgraded)}, "task a: cannot stall: it is queued", ErrTransition},
		{"stall below the limit", []op{start(), run("a"), stall("a", 2, Upgraded)}, "task a: loop limit not reached: 2 of 3 loops", ErrTransition},
		{"stall below the limit after an upgrade", []op{start(), run("a"), stall("a", 3, Upgraded), run("a"), stall("a", 1, ToPerson)}, "task a: loop limit not reached: 1 of 2 loops", ErrTransition},
		{"negative loops", []op{start(), run("a"), done("a", -1)}, "task a: loops: -1 is negative", nil},
		{"complete with tasks left", []op{start(), run("a"), complete()}, "run profiles: cannot complete: task a, e can still run", ErrTransition},
		{"complete twice", []op{start(), run("a"), fail("a", 1), run("e"), done("e", 1), complete(), complete()}, "run profiles: cannot complete: it is partial", ErrTransition},
		{"abort an ended run", []op{start(), abort(), abort()}, "run profiles: cannot abort: it is partial", ErrTransition},
		{"skip after the end", []op{start(), abort(), skip("b")}, "task b: run profiles is partial", ErrTransition},
		{"unknown task's worktree", []op{start(), worktree("zz")}, "task zz: unknown task", ErrUnknownTask},
		{"unknown task merged", []op{start(), merged("zz", 1)}, "task zz: unknown task", ErrUnknownTask},
		{"unknown task's merge retried", []op{retryMerge("zz")}, "task zz: unknown task", ErrUnknownTask},
		{"unknown task's worktree cleaned", []op{cleaned("zz")}, "task zz: unknown task", ErrUnknownTask},
		{"done with an unmerged branch", []op{start(), run("a"), worktree("a"), done("a", 1)}, "task a: cannot end done: its branch feature/profiles-a is not merged", ErrTransition},
		{"merged without a worktree", []op{start(), run("a"), merged("a", 1)}, "task a: cannot merge: it has no worktree branch", ErrTransition},
		{"conflict without a worktree", []op{start(), run("a"), conflict("a", 1, "x")}, "task a: cannot merge: it has no worktree branch", ErrTransition},
		{"conflict naming no file", []op{start(), run("a"), worktree("a"), conflict("a", 1)}, "task a: a conflict names no file", ErrTransition},
		{"merged twice", []op{start(), run("a"), worktree("a"), merged("a", 1), merged("a", 0)}, "task a: cannot end: it is done", ErrTransition},
		{"retry a conflicted task", []op{start(), run("a"), worktree("a"), conflict("a", 1, "x"), retry("a")}, "task a: cannot retry: it is needs-human-rebase", ErrTransition},
		{"retry the merge of a running task", []op{start(), run("a"), worktree("a"), retryMerge("a")}, "task a: cannot retry the merge: it is running", ErrTransition},
		{"retry the merge of a failed task", []op{start(), run("a"), worktree("a"), fail("a", 1), retryMerge("a")}, "task a: cannot retry the merge: it is failed", ErrTransition},
		{"worktree of a done task", []op{start(), run("a"), done("a", 1), worktree("a")}, "task a: cannot record a worktree: it is done", ErrTransition},
		{"worktree of a blocked task", []op{start(), run("a"), fail("a", 1), worktree("b")}, "task b: cannot record a worktree: it is blocked", ErrTransition},
		{"a second worktree", []op{start(), run("a"), worktree("a"), op{"other", func(s *Status, at time.Time) error {
			return s.WorktreeCreated("a", "other", ".worktrees/profiles/other", at)
		}}}, "task a: already has worktree .worktrees/profiles/a on branch feature/profiles-a", ErrTransition},
		{"worktree without a path", []op{start(), run("a"), op{"no path", func(s *Status, at time.Time) error {
			return s.WorktreeCreated("a", "b", "", at)
		}}}, "task a: a worktree needs a branch and a path", ErrTransition},
		{"clean a running task's worktree", []op{start(), run("a"), worktree("a"), cleaned("a")}, "task a: cannot clean its worktree: it is running", ErrTransition},
		{"clean twice", []op{start(), run("a"), worktree("a"), merged("a", 1), cleaned("a"), cleaned("a")}, "task a: cannot clean its worktree: it is cleaned", ErrTransition},
		{"clean without a worktree", []op{start(), run("a"), done("a", 1), cleaned("a")}, "task a: cannot clean its worktree: it has none", ErrTransition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := apply(t, tc.ops[:len(tc.ops)-1])
			s, err := apply(t, tc.ops)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
			if got, want := render(&s)+" "+string(s.Status), render(&before)+" "+string(before.Status); got != want {
				t.Errorf("a refused call changed the document\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestUpgrade(t *testing.T) {
	s, err := apply(t, []op{start(), run("a")})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s.LoopsLeft("a"); n != StallLoops {
		t.Errorf("loops left on sonnet %d, want %d", n, StallLoops)
	}
	if _, err := s.LoopLimitReached("a", 3, t0); err != nil {
		t.Fatal(err)
	}
	a := s.Tasks["a"]
	if a.Model != runplan.ModelOpus || a.ModelUpgrades != 1 || a.LoopCount != 0 || a.Status != TaskQueued {
		t.Errorf("after the upgrade: %+v", *a)
	}
	if n, _ := s.LoopsLeft("a"); n != MaxLoops-StallLoops {
		t.Errorf("loops left on opus %d, want %d", n, MaxLoops-StallLoops)
	}
	if err := s.TaskStarted("a", a.Model, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(9 * time.Minute)
	if got, err := s.LoopLimitReached("a", 2, at); err != nil || got != ToPerson {
		t.Fatalf("second stall: %q, %v", got, err)
	}
	if a.Status != TaskPaused || a.PausedReason != PausedStall || !a.PausedAt.Equal(at) || a.LoopCount != 2 {
		t.Errorf("after the second stall: %+v", *a)
	}
	if n, _ := s.LoopsLeft("a"); n != 0 {
		t.Errorf("loops left %d", n)
	}
	// A person takes it back: a fresh count, still on opus, never upgraded twice.
	if err := s.Retry("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.TaskStarted("a", "", at); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoopLimitReached("a", 2, at); err != nil || got != ToPerson || a.ModelUpgrades != 1 || a.Model != runplan.ModelOpus {
		t.Errorf("stall after the retry: %q, %v, %+v", got, err, *a)
	}
}

func TestSummary(t *testing.T) {
	start0 := t0.Add(30 * time.Minute)
	s := New(parseRun(t, testRun), t0)
	steps := []func() error{
		func() error { return s.Start(start0) },
		func() error { return s.TaskStarted("a", "", start0) },
		func() error { _, err := s.LoopLimitReached("a", 3, start0); return err },
		func() error { return s.TaskStarted("a", "", start0) },
		func() error { return s.TaskEnded("a", Done, 2, start0) },
		func() error { return s.TaskStarted("b", "", start0) },
		func() error { return s.TaskEnded("b", Failed("tests"), 4, start0) },
		func() error { return s.TaskStarted("c", "", start0) },
		func() error { return s.TaskEnded("c", Done, 1, start0) },
		func() error { return s.TaskStarted("e", "", start0) },
		func() error { return s.TaskEnded("e", Done, 3, start0) },
		func() error { return s.Skip("d") },
		func() error { return s.Complete(start0.Add(135*time.Minute + 59*time.Second)) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := Summary{TotalTasks: 5, Successful: 3, Failed: 1, Skipped: 1, TotalLoops: 10, ModelUpgrades: 1, DurationMinutes: 135}
	if s.Status != RunPartial || s.Summary == nil || *s.Summary != want {
		t.Errorf("run %s, summary %+v, want partial %+v", s.Status, s.Summary, want)
	}
	checkInvariants(t, &s)
}

// The document the reducer writes, as JSON: the schema's names and
// spellings, nothing that does not apply.
func TestDocumentJSON(t *testing.T) {
	s := New(parseRun(t, `{"title":"P","slug":"user-profiles","tasks":[{"id":"1a","title":"A"},{"id":"2a","title":"B","depends":["1a"],"model":"opus"}]}`), t0)
	check := func(want string) {
		t.Helper()
		got, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, got, []byte(want)) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	check(`{"prd_slug":"user-profiles","status":"ready","created_at":"2026-02-19T10:00:00Z",
	 "tasks":{"1a":{"status":"queued","model":"sonnet"},"2a":{"status":"queued","model":"opus"}}}`)

	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute).In(time.FixedZone("CET", 3600)) }
	for _, err := range []error{
		s.Start(at(30)),
		s.TaskStarted("1a", "sonnet", at(31)),
		s.TaskEnded("1a", Failed("Build failed"), 5, at(45)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	check(`{"prd_slug":"user-profiles","status":"active","created_at":"2026-02-19T10:00:00Z","started_at":"2026-02-19T10:30:00Z",
	 "tasks":{"1a":{"status":"failed","started_at":"2026-02-19T10:31:00Z","failed_at":"2026-02-19T10:45:00Z","error":"Build failed","model":"sonnet","loop_count":5},
	          "2a":{"status":"blocked","blocked_by":["1a"],"model":"opus"}}}`)

	if err := s.Skip("1a"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{s.TaskStarted("2a", "", at(50)), s.TaskEnded("2a", Done, 1, at(60)), s.Complete(at(61))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	check(`{"prd_slug":"user-profiles","status":"complete","created_at":"2026-02-19T10:00:00Z","started_at":"2026-02-19T10:30:00Z","completed_at":"2026-02-19T11:01:00Z",
	 "summary":{"total_tasks":2,"successful":1,"failed":0,"skipped":1,"total_loops":6,"model_upgrades":0,"duration_minutes":31},
	 "tasks":{"1a":{"status":"skipped","started_at":"2026-02-19T10:31:00Z","failed_at":"2026-02-19T10:45:00Z","error":"Build failed","model":"sonnet","loop_count":5},
	          "2a":{"status":"done","started_at":"2026-02-19T10:50:00Z","completed_at":"2026-02-19T11:00:00Z","model":"opus","loop_count":1}}}`)
}

func TestBind(t *testing.T) {
	r := parseRun(t, testRun)
	s, err := apply(t, []op{start(), run("a"), fail("a", 1)})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	var d Status
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if err := d.Retry("a"); !errors.Is(err, ErrUnbound) {
		t.Fatalf("unbound retry: %v", err)
	}
	if err := d.Bind(r); err != nil {
		t.Fatal(err)
	}
	if err := d.Retry("a"); err != nil {
		t.Fatal(err)
	}
	if got, want := render(&d), "a:queued b:queued c:queued d:queued e:queued"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}

	other := parseRun(t, `{"title":"P","slug":"profiles","tasks":[{"id":"a","title":"A"},{"id":"x","title":"X"}]}`)
	if err := d.Bind(other); err == nil || !strings.Contains(err.Error(), "no entry for task x") {
		t.Errorf("bind to a different run: %v", err)
	}
	delete(d.Tasks, "x")
	d.Tasks["zz"] = &Task{Status: TaskQueued}
	if err := d.Bind(r); err == nil || !strings.Contains(err.Error(), "task zz not in the run") {
		t.Errorf("bind with an extra task: %v", err)
	}
	if err := d.Bind(parseRun(t, `{"title":"Q","slug":"other","tasks":[{"id":"a","title":"A"}]}`)); err == nil {
		t.Error("bind to a run of another slug succeeded")
	}
}

func TestClone(t *testing.T) {
	s, err := apply(t, []op{start(), run("a"), fail("a", 1)})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Clone()
	if err := c.Retry("a"); err != nil {
		t.Fatal(err)
	}
	if got := render(&s); got != "a:failed/1 b:blocked[a] c:blocked[a] d:blocked[a] e:queued" {
		t.Errorf("the clone's retry changed the original: %s", got)
	}
}

// A task's worktree fields as the reducer writes them, in KARIMO's
// spellings: made, in conflict (its needs-human-rebase example), merged
// after a rebase, cleaned.
func TestWorktreeJSON(t *testing.T) {
	s := New(parseRun(t, `{"title":"P","slug":"user-profiles","tasks":[{"id":"2b","title":"B"}]}`), t0)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	check := func(want string) {
		t.Helper()
		got, err := json.Marshal(s.Tasks["2b"])
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, got, []byte(want)) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	for _, err := range []error{
		s.Start(at(30)),
		s.WorktreeCreated("2b", "feature/user-profiles-2b", ".worktrees/user-profiles/2b", at(46)),
		s.TaskStarted("2b", "", at(47)),
		s.WorktreeCreated("2b", "feature/user-profiles-2b", ".worktrees/user-profiles/2b", at(48)),
		s.TaskEnded("2b", Conflict([]string{"src/types/index.ts", "src/components/UserProfile.tsx"}), 3, at(70)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	check(`{"status":"needs-human-rebase","branch":"feature/user-profiles-2b","worktree":".worktrees/user-profiles/2b",
	 "worktree_status":"active","worktree_created_at":"2026-02-19T10:46:00Z","started_at":"2026-02-19T10:47:00Z",
	 "conflict_at":"2026-02-19T11:10:00Z","conflict_files":["src/types/index.ts","src/components/UserProfile.tsx"],
	 "model":"sonnet","loop_count":3}`)

	for _, err := range []error{s.RetryMerge("2b"), s.TaskEnded("2b", Merged, 0, at(95))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	check(`{"status":"done","branch":"feature/user-profiles-2b","worktree":".worktrees/user-profiles/2b",
	 "worktree_status":"pending-cleanup","worktree_created_at":"2026-02-19T10:46:00Z","started_at":"2026-02-19T10:47:00Z",
	 "completed_at":"2026-02-19T11:35:00Z","merged_at":"2026-02-19T11:35:00Z","model":"sonnet","loop_count":3}`)

	if err := s.WorktreeRemoved("2b"); err != nil {
		t.Fatal(err)
	}
	check(`{"status":"done","branch":"feature/user-profiles-2b","worktree":".worktrees/user-profiles/2b",
	 "worktree_status":"cleaned","worktree_created_at":"2026-02-19T10:46:00Z","started_at":"2026-02-19T10:47:00Z",
	 "completed_at":"2026-02-19T11:35:00Z","merged_at":"2026-02-19T11:35:00Z","model":"sonnet","loop_count":3}`)
}

// A conflict's files are copied on the way in: the caller's slice may
// change afterwards.
func TestConflictCopiesFiles(t *testing.T) {
	files := []string{"a", "b"}
	o := Conflict(files)
	files[0] = "changed"
	s, err := apply(t, []op{start(), run("a"), worktree("a")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.TaskEnded("a", o, 1, t0); err != nil {
		t.Fatal(err)
	}
	o.files[1] = "changed"
	if got := s.Tasks["a"].ConflictFiles; !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("conflict files %v", got)
	}
}
