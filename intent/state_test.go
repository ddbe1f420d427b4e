package intent

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// every10s is an intent firing at every tenth second, catching up n.
func every10s(t *testing.T, n int, overflow Overflow) (Spec, Times) {
	t.Helper()
	s, err := Build(Request{Name: "x", Target: sampleTarget(t), Cron: "*/10 * * * * * *", MinInterval: time.Second,
		CatchUp: n, Overflow: string(overflow)}, now)
	if err != nil {
		t.Fatal(err)
	}
	times, err := s.Times()
	if err != nil {
		t.Fatal(err)
	}
	return s, times
}

// sim plays a schedule's fires through Admit as the fire workflow does:
// one at a time, in the order of their times, each starting when the one
// before it ended; a run lasts runFor.
type sim struct {
	t      *testing.T
	spec   Spec
	times  Times
	st     State
	clock  time.Time
	runFor time.Duration
	ran    []time.Time
}

func (s *sim) fire(nominal time.Time) Admission {
	s.clock = later(s.clock, nominal)
	a := Admit(s.st, s.spec, s.times, nominal, s.clock)
	rec := FireRecord{Kind: a.Kind, Nominal: nominal, Started: s.clock}
	if a.Run {
		if a.Fresh {
			s.st.BusySince = s.clock
		}
		s.clock = s.clock.Add(s.runFor)
		s.st.BusyUntil = s.clock
		s.ran = append(s.ran, nominal)
		rec.Result = ResultRan
	} else {
		rec.Result = a.Result
		s.clock = s.clock.Add(100 * time.Millisecond)
	}
	s.st.Record(rec)
	return a
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func at(sec int) time.Time { return now.Add(time.Duration(sec) * time.Second) }

func TestAdmitOnTimeAndOverlap(t *testing.T) {
	spec, times := every10s(t, 1, OverflowSkip)
	s := &sim{t: t, spec: spec, times: times, runFor: 25 * time.Second}
	if a := s.fire(at(10)); !a.Run || a.Kind != FireScheduled || !a.Fresh {
		t.Fatalf("first: %+v", a)
	}
	// The run lasts until 35 s: the fires at 20 and 30 came while it ran.
	for _, sec := range []int{20, 30} {
		if a := s.fire(at(sec)); a.Run || a.Result != ResultOverlap {
			t.Fatalf("fire at %d: %+v", sec, a)
		}
	}
	if a := s.fire(at(40)); !a.Run || a.Kind != FireScheduled {
		t.Fatalf("after the overlap: %+v", a)
	}
	if s.st.Skipped != 2 || s.st.Fires != 4 {
		t.Fatalf("state: %+v", s.st)
	}
}

// The server was down from 12 s to 47 s: it admits what its window lets
// through (here 20, 30 and 40), and the intent runs the newest n of them.
func TestAdmitServerDownBacklog(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			spec, times := every10s(t, n, OverflowSkip)
			s := &sim{t: t, spec: spec, times: times, runFor: 2 * time.Second}
			s.fire(at(10))
			s.clock = at(47)
			for _, sec := range []int{20, 30, 40} {
				s.fire(at(sec))
			}
			// The catch-up runs from 47 s on, 2 s each: the fire due at 50 s
			// came while it ran unless it was a single run.
			s.fire(at(50))
			s.fire(at(60))
			want := []time.Time{at(10)}
			for sec := 40 - 10*(n-1); sec <= 40; sec += 10 {
				want = append(want, at(sec))
			}
			if n == 1 {
				want = append(want, at(50))
			}
			want = append(want, at(60))
			if fmt.Sprint(s.ran) != fmt.Sprint(want) {
				t.Fatalf("ran %v, want %v", s.ran, want)
			}
		})
	}
}

// Every worker was down from 12 s to 63 s: the server started nothing
// late but the fires piled up behind the first; the newest n run, and the
// fires that came due while they ran are skipped as overlaps.
func TestAdmitWorkerDownBacklog(t *testing.T) {
	spec, times := every10s(t, 2, OverflowSkip)
	s := &sim{t: t, spec: spec, times: times, runFor: 15 * time.Second}
	s.fire(at(10)) // runs 10..25
	s.clock = at(63)
	var kinds []string
	for sec := 20; sec <= 90; sec += 10 {
		a := s.fire(at(sec))
		kinds = append(kinds, fmt.Sprintf("%d:%s/%v", sec, a.Kind, a.Run))
	}
	want := []time.Time{at(10), at(50), at(60), at(100)}
	s.fire(at(100))
	if fmt.Sprint(s.ran) != fmt.Sprint(want) {
		t.Fatalf("ran %v, want %v\n%v", s.ran, want, kinds)
	}
	if s.st.Recent[len(s.st.Recent)-1].Kind != FireScheduled {
		t.Fatalf("back on time: %+v", s.st.Recent)
	}
}

func TestAdmitManualAndCatchUpKinds(t *testing.T) {
	spec, times := every10s(t, 1, OverflowSkip)
	st := State{}
	if a := Admit(st, spec, times, at(13), at(13)); !a.Run || a.Kind != FireManual || !a.Fresh {
		t.Fatalf("a trigger: %+v", a)
	}
	// Its time is truncated to the second: asked for in the second the
	// previous fire ended, it still runs.
	busy := State{BusySince: at(11), BusyUntil: at(13).Add(300 * time.Millisecond)}
	if a := Admit(busy, spec, times, at(13), at(13).Add(500*time.Millisecond)); !a.Run || a.Kind != FireManual {
		t.Fatalf("a trigger right after a fire: %+v", a)
	}
	if a := Admit(st, spec, times, at(10), at(15)); !a.Run || a.Kind != FireScheduled {
		t.Fatalf("a little late: %+v", a)
	}
	half, err := Build(Request{Name: "x", Target: sampleTarget(t), Cron: "*/30 * * * * * *", MinInterval: time.Second}, now)
	if err != nil {
		t.Fatal(err)
	}
	halfTimes, _ := half.Times()
	if a := Admit(st, half, halfTimes, at(30), at(45)); !a.Run || a.Kind != FireCatchUp || a.Newer != 0 {
		t.Fatalf("late without a newer time: %+v", a)
	}
	if a := Admit(st, spec, times, at(10), at(21)); a.Run || a.Result != ResultOverflow {
		t.Fatalf("a newer time is due: %+v", a)
	}
}

func TestRanConverges(t *testing.T) {
	spec, _ := every10s(t, 1, OverflowSkip)
	cond, _ := ParseCondition("any_of(task_completed, runs>=3)")
	spec.Until, spec.MaxRuns = cond, 10
	st := State{}
	blocked := Outcome{Target: "task T5", Status: "blocked", Detail: "Phase test failed", Attempt: 1}
	if st.Ran(spec, blocked) || st.Status == StatusConverged {
		t.Fatal("converged after a blocked run")
	}
	if st.Ran(spec, Outcome{Target: "task T5", Status: "completed", Completed: true, Attempt: 2}) != true ||
		st.Status != StatusConverged || !strings.Contains(st.Reason, "until any_of(task_completed, runs>=3) holds after run 2 (task T5 completed)") {
		t.Fatalf("completed: %+v", st)
	}
	if st.LastAttempt != 2 || st.Runs != 2 {
		t.Fatalf("%+v", st)
	}

	spec.Until, spec.MaxRuns = nil, 2
	st = State{}
	st.Ran(spec, blocked)
	if !st.Ran(spec, blocked) || !strings.HasPrefix(st.Reason, "max_runs 2 reached (task T5 blocked: Phase test failed)") {
		t.Fatalf("max runs: %+v", st)
	}
	// An update lowered max_runs under the runs made: done before running.
	spec.MaxRuns = 1
	st = State{Runs: 1}
	if !st.Done(spec) || st.Status != StatusConverged {
		t.Fatalf("done: %+v", st)
	}
	spec.MaxRuns, spec.Until = 5, &Condition{Kind: CondAllOf, Of: []Condition{{Kind: CondRuns, N: 1}, {Kind: CondTaskCompleted}}}
	if st := (State{Runs: 3}); st.Done(spec) {
		t.Fatal("a condition that needs an outcome cannot hold before a run")
	}
}

func TestFailedBacksOffThenOpensTheCircuit(t *testing.T) {
	spec, _ := every10s(t, 1, OverflowSkip)
	spec.MinInterval, spec.MaxErrors = Duration(time.Second), 4
	st := State{Status: StatusActive}
	var waits []time.Duration
	for i := 1; i <= 4; i++ {
		open, wait := st.Failed(spec, fmt.Sprintf("boom %d", i))
		if open != (i == 4) {
			t.Fatalf("failure %d: open %v", i, open)
		}
		if !open {
			waits = append(waits, wait)
		}
	}
	if fmt.Sprint(waits) != "[1s 2s 4s]" {
		t.Fatalf("waits %v", waits)
	}
	if st.Status != StatusError || st.Reason != "4 consecutive failed fires; last: boom 4" || st.Errors != 4 {
		t.Fatalf("%+v", st)
	}
	st.Reopen()
	if st.Status != StatusActive || st.ConsecutiveErrors != 0 || st.Errors != 4 {
		t.Fatalf("reopened: %+v", st)
	}
}

func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		min  time.Duration
		n    int
		want time.Duration
	}{
		{time.Minute, 1, time.Minute},
		{time.Minute, 2, 2 * time.Minute},
		{time.Minute, 6, 32 * time.Minute},
		{time.Minute, 7, time.Hour},
		{time.Minute, 1000, time.Hour},
		{time.Second, 0, time.Second},
		{2 * time.Hour, 1, time.Hour},
	} {
		if got := Backoff(c.min, c.n); got != c.want {
			t.Errorf("Backoff(%s, %d) = %s, want %s", c.min, c.n, got, c.want)
		}
	}
}

func TestMissedFoldsIntoTheDeferredFireUnderDefer(t *testing.T) {
	spec, _ := every10s(t, 1, OverflowDefer)
	st := State{}
	st.Missed(spec, 0)
	st.Missed(spec, 3)
	st.Missed(spec, 3) // read again: nothing new
	if st.Deferred != 3 || st.MissedSeen != 3 {
		t.Fatalf("%+v", st)
	}
	spec.Overflow = OverflowSkip
	st.Missed(spec, 5)
	if st.Deferred != 3 || st.MissedSeen != 5 {
		t.Fatalf("skip: %+v", st)
	}
}

func TestRecordKeepsTheLatest(t *testing.T) {
	st := State{}
	for i := range 25 {
		st.Record(FireRecord{ID: fmt.Sprint(i), Result: ResultRan})
	}
	if len(st.Recent) != recentFires || st.Recent[0].ID != "15" || st.Fires != 25 {
		t.Fatalf("%d %s %d", len(st.Recent), st.Recent[0].ID, st.Fires)
	}
}

func TestStatusOf(t *testing.T) {
	for _, c := range []struct {
		paused bool
		note   string
		want   Status
	}{
		{false, ErrorNote("x"), StatusActive},
		{true, ErrorNote("3 consecutive failed fires"), StatusError},
		{true, ConvergedNote("max_runs 1 reached"), StatusConverged},
		{true, "paused by ana: holiday", StatusPaused},
		{true, "", StatusPaused},
	} {
		if got := StatusOf(c.paused, c.note); got != c.want {
			t.Errorf("%v %q: %s", c.paused, c.note, got)
		}
	}
}
