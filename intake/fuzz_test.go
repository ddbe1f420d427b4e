package intake

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"

	"karvi-edda-temporal/runplan"
)

// FuzzDecodeBoard: any bytes either fail with a board error or read as a
// board whose every task, bad or not, has an id.
func FuzzDecodeBoard(f *testing.F) {
	data, err := os.ReadFile("testdata/board.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"_version":1,"taskPlan":{"tasks":[{"id":"A","depends":"x"},7,null]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBoard(data)
		if err != nil {
			return
		}
		for i, task := range b.TaskPlan.Tasks {
			if task.ID == "" && task.DecodeErr != "" {
				t.Fatalf("task %d: undecodable task without a label", i)
			}
			if task.DecodeErr == "" {
				_, _ = BuildDispatch(task, b, Config{})
			}
		}
		_, _ = Reconcile(b, State{}, Config{})
	})
}

// byteStream feeds a scenario from fuzz input; it reads zeros when spent.
type byteStream struct {
	data []byte
	pos  int
}

func (s *byteStream) next() int {
	if s.pos >= len(s.data) {
		return 0
	}
	s.pos++
	return int(s.data[s.pos-1])
}

func (s *byteStream) done() bool { return s.pos >= len(s.data) }

var (
	fuzzIDs      = []string{"A", "B", "C", "D", "E", "bad id"}
	fuzzStatuses = []string{StatusPending, StatusDispatched, StatusInProgress, StatusBlocked, StatusCompleted,
		StatusReviewing, StatusNeedsRevision, StatusApproved, StatusCancelled}
	fuzzHints    = []string{"edda", "openclaw", ""}
	fuzzProjects = []string{"", "PROJ-1", "PROJ-2"}
	fuzzPStatus  = []string{ProjectExecuting, ProjectPaused, ProjectDone}
)

// FuzzReconcile drives the intake with random boards delivered in random
// order (old snapshots again, duplicates), random workflow ends and random
// starts refused (the workflow id taken by someone else), and checks after
// every tick that no task is claimed twice, that nothing is done to a task
// that is not ours, that every claim has a key of its own, and that the
// state stays bounded, deterministic and serialisable.
func FuzzReconcile(f *testing.F) {
	f.Add([]byte{1, 0, 1, 3, 1, 1, 9, 2, 0, 0, 4, 0, 7, 0, 2, 1, 0, 3, 1, 1, 8, 0})
	f.Add([]byte{5, 1, 1, 5, 2, 1, 0, 1, 3, 1, 1, 2, 0, 4, 1, 6, 1, 1, 1, 4, 8, 2, 1, 9, 1})
	f.Add([]byte("the board sends it back: completed, needs_revision, in_progress"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &byteStream{data: data}
		cfg := Config{}
		tasks := map[string]*Task{}
		projects := map[string]*Project{}
		var version int64
		var history []Board
		st := State{}
		claimedOnce := map[string]bool{} // first claims since the task was last off the board

		snapshot := func() Board {
			version++
			b := Board{Version: version, Participants: []Participant{{ID: "h", Type: "human"}, {ID: "bot", Type: "agent"}}}
			for _, id := range fuzzIDs {
				if tk, ok := tasks[id]; ok {
					c := *tk
					c.History = append([]HistoryEntry(nil), tk.History...)
					c.Depends = append([]string(nil), tk.Depends...)
					b.TaskPlan.Tasks = append(b.TaskPlan.Tasks, c)
				}
			}
			for _, id := range fuzzProjects[1:] {
				if p, ok := projects[id]; ok {
					c := *p
					c.TaskIDs = nil
					for _, tk := range b.TaskPlan.Tasks {
						if tk.ProjectID == id {
							c.TaskIDs = append(c.TaskIDs, tk.ID)
						}
					}
					b.Projects = append(b.Projects, c)
				}
			}
			if s.next()%5 == 0 {
				on := true
				b.Controls.AutoDispatch = &on
			}
			return b
		}

		for step := 0; !s.done() && step < 200; step++ {
			id := fuzzIDs[s.next()%len(fuzzIDs)]
			switch op := s.next() % 11; op {
			case 0: // add or replace a task
				tk := &Task{ID: id, Title: "t " + id, Assignee: []string{"h", "bot", ""}[s.next()%3],
					RuntimeHint: fuzzHints[s.next()%len(fuzzHints)], ProjectID: fuzzProjects[s.next()%len(fuzzProjects)]}
				if s.next()%2 == 0 {
					tk.Status = StatusDispatched
				} else {
					tk.Status = StatusPending
					tk.Depends = []string{fuzzIDs[s.next()%len(fuzzIDs)]}
				}
				if s.next()%7 == 0 {
					tk.Skill = "Bad Skill"
				}
				tk.History = []HistoryEntry{{Status: tk.Status}}
				tasks[id] = tk
			case 1, 2, 3: // a status write
				if tk, ok := tasks[id]; ok {
					tk.Status = fuzzStatuses[s.next()%len(fuzzStatuses)]
					tk.History = append(tk.History, HistoryEntry{Status: tk.Status})
				}
			case 4: // karvi deletes a task
				delete(tasks, id)
			case 5: // a project appears or changes status
				pid := fuzzProjects[1+s.next()%2]
				projects[pid] = &Project{ID: pid, Title: "p", Repo: "r", Status: fuzzPStatus[s.next()%3]}
			case 6: // a project goes
				delete(projects, fuzzProjects[1+s.next()%2])
			case 7: // a workflow ends
				st = st.Ended(id, []string{StatusCompleted, StatusBlocked}[s.next()%2])
				continue
			case 8: // an old snapshot arrives again
				if len(history) > 0 {
					tick(t, history[s.next()%len(history)], &st, cfg, claimedOnce)
				}
				continue
			case 9: // karvi trims a history
				if tk, ok := tasks[id]; ok && len(tk.History) > 0 {
					tk.History = tk.History[1:]
				}
			case 10: // a start refused: the workflow id runs for someone else
				c, ok := st.Claim(id)
				if !ok || c.Phase != PhaseRunning {
					continue
				}
				refused := false
				if c.RunWorkflowID == "" {
					st, refused = st.Refused(id, "workflow id in use"), true
				} else {
					// A run is refused by the apply of its start, while
					// its project and run claim are there.
					for _, r := range st.Runs {
						if r.WorkflowID == c.RunWorkflowID && r.Refused == "" {
							st, refused = st.RefusedRun(r.ProjectID, "run workflow id in use"), true
						}
					}
				}
				if c, _ := st.Claim(id); refused && c.Phase != PhaseRefused {
					t.Fatalf("a refused start left %s %s", id, c.Phase)
				}
				continue
			}
			b := snapshot()
			history = append(history, b)
			tick(t, b, &st, cfg, claimedOnce)
		}
	})
}

// tick reconciles one board and checks the promises.
func tick(t *testing.T, b Board, st *State, cfg Config, claimedOnce map[string]bool) {
	t.Helper()
	before := *st
	acts, next := Reconcile(b, before, cfg)
	acts2, next2 := Reconcile(b, before, cfg)
	if !reflect.DeepEqual(acts, acts2) || !reflect.DeepEqual(next, next2) {
		t.Fatalf("not deterministic")
	}
	stale := b.Version < before.Version && before.Stale+1 < StaleLimit
	if stale {
		want := before.clone()
		want.Stale++
		if !reflect.DeepEqual(normal(next), normal(want)) || len(acts) != 1 {
			t.Fatalf("a stale board did more than count itself")
		}
	}
	// Tasks karvi deleted are off the board: their next claim is new.
	if !stale {
		for id := range claimedOnce {
			if _, on := b.Task(id); !on {
				delete(claimedOnce, id)
			}
		}
	}
	acted := map[string]Kind{}
	for _, a := range acts {
		var ids []string
		switch a.Kind {
		case KindIgnore, KindPauseRun, KindResumeRun:
			continue
		case KindStartRun:
			run, err := runplan.Parse(a.RunFile)
			if err != nil {
				t.Fatalf("start_run with a bad run file: %v", err)
			}
			for _, rt := range run.Tasks {
				ids = append(ids, rt.ID)
			}
		default:
			ids = []string{a.TaskID}
		}
		for _, id := range ids {
			if k, twice := acted[id]; twice {
				t.Fatalf("two actions on %s in one tick: %s and %s", id, k, a.Kind)
			}
			acted[id] = a.Kind
			prior, wasClaimed := before.Claim(id)
			task, onBoard := b.Task(id)
			switch a.Kind {
			case KindAbort:
				if !wasClaimed || prior.Phase != PhaseRunning {
					t.Fatalf("abort of %s, which was not running here", id)
				}
			case KindRedispatch:
				if !wasClaimed || prior.Phase != PhaseEnded || !onBoard || !Routed(task, cfg) {
					t.Fatalf("redispatch of %s: claimed %v phase %q", id, wasClaimed, prior.Phase)
				}
			case KindStart, KindBlock, KindStartRun:
				if !onBoard || !Routed(task, cfg) {
					t.Fatalf("%s of %s, a task not routed here (on board %v, task %+v, action %+v)", a.Kind, id, onBoard, task, a)
				}
				if a.Kind == KindStart && !wasClaimed && !Ours(task, cfg) {
					t.Fatalf("start of %s in status %s", id, task.Status)
				}
				if wasClaimed {
					// Taken again after the board sent a refused task
					// back, or a redispatch whose plan is now bad: both
					// act on the claim, neither claims anew.
					again := prior.Phase == PhaseRefused && a.Kind != KindStartRun
					badRedispatch := prior.Phase == PhaseEnded && a.Kind == KindBlock
					if !again && !badRedispatch {
						t.Fatalf("%s of %s, already claimed (%s)", a.Kind, id, prior.Phase)
					}
					if a.Attempt != prior.Attempt+1 {
						t.Fatalf("%s of %s: attempt %d after %d", a.Kind, id, a.Attempt, prior.Attempt)
					}
					continue
				}
				if claimedOnce[id] {
					t.Fatalf("%s claimed twice", id)
				}
				claimedOnce[id] = true
			}
		}
	}
	checkKeys(t, before, next, acts)
	if !stale {
		for _, c := range next.Claims {
			if _, on := b.Task(c.TaskID); !on {
				t.Fatalf("state keeps %s, which is off the board", c.TaskID)
			}
		}
		for _, r := range next.Runs {
			if _, on := b.Project(r.ProjectID); !on {
				t.Fatalf("state keeps run of %s, which is off the board", r.ProjectID)
			}
		}
	}
	data, err := json.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(normal(back), normal(next)) {
		t.Fatalf("state does not round-trip: %v\n%s", err, data)
	}
	*st = next
}

// checkKeys checks that keys are handed out once: every claim and run
// holds a key of its own, no higher than the state's last, and an action
// carries the key of the claim (or run) it acts for.
func checkKeys(t *testing.T, before, next State, acts []Action) {
	t.Helper()
	if next.LastKey < before.LastKey {
		t.Fatalf("last key went back from %d to %d", before.LastKey, next.LastKey)
	}
	seen := map[int64]string{}
	mark := func(k int64, who string) {
		if k == 0 || k > next.LastKey {
			t.Fatalf("%s: key %d (last handed out %d)", who, k, next.LastKey)
		}
		if o, dup := seen[k]; dup {
			t.Fatalf("key %d held by %s and %s", k, o, who)
		}
		seen[k] = who
	}
	for _, c := range next.Claims {
		mark(c.Key, "task "+c.TaskID)
		if old, ok := before.Claim(c.TaskID); ok && old.Key != c.Key && c.Key <= before.LastKey {
			t.Fatalf("task %s took key %d, handed out before", c.TaskID, c.Key)
		}
	}
	for _, r := range next.Runs {
		if r.Refused == "" || r.Key != 0 {
			mark(r.Key, "run "+r.ProjectID)
		}
	}
	for _, a := range acts {
		switch a.Kind {
		case KindStart, KindRedispatch, KindAbort:
			c, ok := next.Claim(a.TaskID)
			if !ok && a.Kind == KindAbort {
				c, ok = before.Claim(a.TaskID) // deleted from the board: forgotten
			}
			if !ok || c.Key != a.Key {
				t.Fatalf("%s of %s carries key %d, its claim %d", a.Kind, a.TaskID, a.Key, c.Key)
			}
		case KindStartRun:
			r, ok := next.Run(a.ProjectID)
			if !ok || r.Key != a.Key || a.Key <= before.LastKey {
				t.Fatalf("start_run of %s carries key %d, its run %d (last before %d)", a.ProjectID, a.Key, r.Key, before.LastKey)
			}
		}
	}
}

// normal makes empty and nil slices equal for comparison.
func normal(s State) string { return fmt.Sprintf("%+v", s) }
