package runstatus

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// FuzzReducer feeds random sequences of calls to the reducer and checks
// after each one that the document holds together: a refused call changes
// nothing, Complete succeeds exactly when the run is finished, and the
// invariants below.
func FuzzReducer(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 0, 2, 1, 3, 2, 4, 0, 5, 1})
	f.Add([]byte{0, 0, 1, 0, 6, 0, 3, 1, 1, 0, 6, 0, 2, 2, 9, 0})
	f.Add([]byte{0, 0, 1, 4, 3, 4, 7, 0, 1, 1, 8, 0, 4, 3, 9, 0})
	f.Add([]byte{1, 0, 0, 0, 1, 0, 10, 0, 5, 0})
	f.Add([]byte{0, 0, 11, 0, 1, 0, 13, 0, 14, 0, 12, 0, 15, 0, 1, 1, 11, 1, 13, 1, 5, 1, 9, 0})
	f.Add([]byte{0, 0, 1, 4, 11, 4, 3, 4, 6, 4, 11, 5, 1, 4, 2, 4, 12, 4, 15, 4, 9, 0})
	r := parseRun(f, `{"title":"F","slug":"f","tasks":[
	 {"id":"a","title":"A"},
	 {"id":"b","title":"B","depends":["a"],"complexity":6},
	 {"id":"c","title":"C","depends":["a"]},
	 {"id":"d","title":"D","depends":["b","c"]},
	 {"id":"e","title":"E"},
	 {"id":"g","title":"G","depends":["e","d"]}]}`)
	ids := []string{"a", "b", "c", "d", "e", "g", "zz"}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := New(r, t0)
		for i := 0; i+1 < len(data); i += 2 {
			at := t0.Add(time.Duration(i) * time.Minute)
			id := ids[int(data[i+1])%len(ids)]
			loops := int(data[i+1]) % 7
			before := snapshot(t, &s)
			wasFinished, wasEnded := s.Finished(), s.ended()
			var err error
			switch data[i] % 16 {
			case 0:
				err = s.Start(at)
			case 1:
				err = s.TaskStarted(id, "", at)
			case 2:
				err = s.TaskEnded(id, Done, loops, at)
			case 3:
				err = s.TaskEnded(id, Failed("x"), loops, at)
			case 4:
				_, err = s.LoopLimitReached(id, loops, at)
			case 5:
				err = s.Skip(id)
			case 6:
				err = s.Retry(id)
			case 7:
				err = s.Pause()
			case 8:
				err = s.Resume()
			case 9:
				err = s.Complete(at)
				if (err == nil) != (wasFinished && !wasEnded) {
					t.Fatalf("complete: %v, finished %v, ended %v", err, wasFinished, wasEnded)
				}
			case 10:
				err = s.Abort(at)
			case 11:
				// An odd second byte names another worktree than the
				// task's first, which an active one must refuse.
				err = s.WorktreeCreated(id, "f-"+id, fmt.Sprintf(".worktrees/f/%s-%d", id, data[i+1]%2), at)
			case 12:
				err = s.TaskEnded(id, Merged, loops, at)
			case 13:
				err = s.TaskEnded(id, Conflict([]string{"x", id}[:1+loops%2]), loops, at)
			case 14:
				err = s.RetryMerge(id)
			case 15:
				err = s.WorktreeRemoved(id)
			}
			if err != nil && snapshot(t, &s) != before {
				t.Fatalf("call %d refused (%v) but changed the document", i/2, err)
			}
			checkInvariants(t, &s)
		}
	})
}

func snapshot(t *testing.T, s *Status) string {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// checkInvariants checks what must hold of any document the reducer made,
// recomputing blocking from the dependencies rather than trusting it.
func checkInvariants(t *testing.T, s *Status) {
	t.Helper()
	if len(s.Tasks) != len(s.run.Tasks) {
		t.Fatalf("%d task entries for %d tasks", len(s.Tasks), len(s.run.Tasks))
	}
	settled := func(id string) bool {
		st := s.Tasks[id].Status
		return st == TaskDone || st == TaskSkipped
	}
	var failedUp func(id string) []string
	failedUp = func(id string) []string {
		rt, _ := s.run.Task(id)
		var up []string
		for _, d := range rt.Depends {
			switch {
			case s.Tasks[d].Status == TaskFailed:
				up = append(up, d)
			case !settled(d):
				up = append(up, failedUp(d)...)
			}
		}
		return up
	}
	ready := s.Ready()
	if s.Status != RunActive && len(ready) > 0 {
		t.Fatalf("run %s has ready tasks %v", s.Status, ready)
	}
	var want []string
	for _, rt := range s.run.Tasks {
		task := s.Tasks[rt.ID]
		deps := true
		for _, d := range rt.Depends {
			deps = deps && settled(d)
		}
		if task.Status == TaskQueued && deps {
			want = append(want, rt.ID)
		}
		if task.Status == TaskRunning && !deps {
			t.Fatalf("task %s runs before its dependencies", rt.ID)
		}
		up := failedUp(rt.ID)
		switch task.Status {
		case TaskQueued:
			if len(up) > 0 || len(task.BlockedBy) > 0 {
				t.Fatalf("task %s queued with failures upstream %v, blocked_by %v", rt.ID, up, task.BlockedBy)
			}
		case TaskBlocked:
			if slices.Contains(ready, rt.ID) {
				t.Fatalf("task %s both ready and blocked", rt.ID)
			}
			var named []string
			for _, o := range s.run.Tasks {
				if slices.Contains(up, o.ID) {
					named = append(named, o.ID)
				}
			}
			if len(named) == 0 || !slices.Equal(named, task.BlockedBy) {
				t.Fatalf("task %s blocked_by %v, failed upstream %v", rt.ID, task.BlockedBy, named)
			}
		}
		if task.LoopCount < 0 || task.ModelUpgrades > 1 || (task.ModelUpgrades == 1 && task.Model != "opus") {
			t.Fatalf("task %s: loops %d, upgrades %d on %s", rt.ID, task.LoopCount, task.ModelUpgrades, task.Model)
		}
		checkWorktree(t, rt.ID, task)
	}
	if s.Status == RunActive && !slices.Equal(ready, want) {
		t.Fatalf("ready %v, want %v", ready, want)
	}

	ended := s.Status == RunComplete || s.Status == RunPartial
	running := false
	for _, task := range s.Tasks {
		running = running || task.Status == TaskRunning
	}
	if finished := ended || (!running && len(want) == 0); s.Finished() != finished {
		t.Fatalf("finished %v, want %v (running %v, could start %v)", s.Finished(), finished, running, want)
	}
	if ended != (s.Summary != nil) || (ended && !s.Finished()) {
		t.Fatalf("run %s, summary %v, finished %v", s.Status, s.Summary, s.Finished())
	}
	if !ended {
		return
	}
	var sum Summary
	all := true
	for _, rt := range s.run.Tasks {
		task := s.Tasks[rt.ID]
		switch task.Status {
		case TaskDone:
			sum.Successful++
		case TaskFailed:
			sum.Failed++
		case TaskSkipped:
			sum.Skipped++
		case TaskRunning:
			t.Fatalf("task %s still running in an ended run", rt.ID)
		}
		all = all && settled(rt.ID)
		sum.TotalLoops += task.LoopCount
		sum.ModelUpgrades += task.ModelUpgrades
	}
	got := *s.Summary
	if got.TotalTasks != len(s.run.Tasks) || got.Successful != sum.Successful || got.Failed != sum.Failed ||
		got.Skipped != sum.Skipped || got.TotalLoops != sum.TotalLoops || got.ModelUpgrades != sum.ModelUpgrades ||
		got.Successful+got.Failed+got.Skipped > got.TotalTasks || got.DurationMinutes < 0 {
		t.Fatalf("summary %+v, counted %+v", got, sum)
	}
	if all != (s.Status == RunComplete) {
		t.Fatalf("run %s, every task done or skipped: %v", s.Status, all)
	}
}

// checkWorktree checks a task's worktree and merge fields against its
// state: a worktree has a branch, a path and a state, or none of them; a
// task with a branch is done only once merged, and a merge means done; a
// conflict is recorded on a task that needs a rebase (or was skipped
// from there), and only there.
func checkWorktree(t *testing.T, id string, task *Task) {
	t.Helper()
	has := task.WorktreeStatus != ""
	if (task.Branch != "") != has || (task.Worktree != "") != has || task.WorktreeCreatedAt.IsZero() == has {
		t.Fatalf("task %s: branch %q, worktree %q, status %q, created %v", id, task.Branch, task.Worktree, task.WorktreeStatus, task.WorktreeCreatedAt)
	}
	merged := !task.MergedAt.IsZero()
	if merged != (task.Status == TaskDone && has) {
		t.Fatalf("task %s: %s with worktree %q, merged at %v", id, task.Status, task.WorktreeStatus, task.MergedAt)
	}
	if task.WorktreeStatus == WorktreePendingCleanup && !merged {
		t.Fatalf("task %s: worktree pending cleanup but not merged", id)
	}
	conflict := len(task.ConflictFiles) > 0
	if conflict != !task.ConflictAt.IsZero() {
		t.Fatalf("task %s: conflict files %v at %v", id, task.ConflictFiles, task.ConflictAt)
	}
	if conflict && task.Status != TaskNeedsHumanRebase && task.Status != TaskSkipped {
		t.Fatalf("task %s: %s with conflict files %v", id, task.Status, task.ConflictFiles)
	}
	if task.Status == TaskNeedsHumanRebase && (!conflict || !has) {
		t.Fatalf("task %s: needs a rebase without a conflict or a worktree: %+v", id, *task)
	}
}
