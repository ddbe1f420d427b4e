package intent

import (
	"fmt"
	"strings"
	"time"
)

// Status is where an intent stands.
type Status string

// The statuses. Active, error and converged are what the fires record;
// paused is a person's pause, read from the schedule.
const (
	StatusActive    Status = "active"
	StatusPaused    Status = "paused"
	StatusError     Status = "error"
	StatusConverged Status = "converged"
)

// State is what an intent carries from one fire to the next: every fire
// starts from the state the previous one ended with and returns its own.
// It is small and bounded (the last recentFires fires), since it travels
// as a workflow result and input.
type State struct {
	Status Status `json:"status"`
	// Reason says why the intent is in error or converged.
	Reason string `json:"reason,omitempty"`
	// Fires counts the fires that started, skipped ones included.
	Fires int `json:"fires"`
	// Runs counts the target runs that reached an outcome.
	Runs int `json:"runs"`
	// Errors counts failed attempts at a fire, ConsecutiveErrors those
	// since the last run that reached an outcome.
	Errors            int `json:"errors"`
	ConsecutiveErrors int `json:"consecutiveErrors"`
	// Skipped counts fires skipped because the intent was busy or because
	// they were over the catch-up bound.
	Skipped int `json:"skipped"`
	// Deferred counts missed fires folded into the deferred fire that is
	// still to come.
	Deferred int `json:"deferred,omitempty"`
	// MissedSeen is the schedule's count of fires missed outside its
	// catch-up window, as a fire last read it.
	MissedSeen int `json:"missedSeen,omitempty"`
	// LastAttempt is the last attempt a fire started of a dispatch's task.
	LastAttempt int `json:"lastAttempt,omitempty"`
	// BusySince and BusyUntil span the latest stretch of fires that ran
	// one after another: a fire due inside it came while the intent was
	// busy, one due before it waited behind it.
	BusySince time.Time `json:"busySince,omitzero"`
	BusyUntil time.Time `json:"busyUntil,omitzero"`
	// LastOutcome is how the target of the latest run ended.
	LastOutcome *Outcome `json:"lastOutcome,omitempty"`
	// Recent are the latest fires, oldest first.
	Recent []FireRecord `json:"recent,omitempty"`
	// Doing is what the fire under way is doing; empty once it ended.
	Doing string `json:"doing,omitempty"`
}

// Outcome is how a target's workflow ended.
type Outcome struct {
	Target     string `json:"target"`
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	// Status is the task's (completed, blocked) or the run's (complete,
	// partial).
	Status    string    `json:"status"`
	Completed bool      `json:"completed"`
	Detail    string    `json:"detail,omitempty"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
}

// String is the outcome in a few words: "task T5 completed", "task T5
// blocked: Phase test failed".
func (o Outcome) String() string {
	s := o.Target + " " + o.Status
	if o.Detail != "" && !o.Completed {
		s += ": " + o.Detail
	}
	return s
}

// FireKind says why a fire came.
type FireKind string

// The kinds of fire.
const (
	FireScheduled FireKind = "scheduled" // at its time
	FireCatchUp   FireKind = "catch_up"  // late: missed while nothing could fire
	FireManual    FireKind = "manual"    // a person's trigger
	FireDeferred  FireKind = "deferred"  // stands for missed fires over the bound
)

// FireResult is how a fire (or one run of a deferred fire) ended.
type FireResult string

// The results.
const (
	ResultRan      FireResult = "ran"      // the target reached an outcome
	ResultOverlap  FireResult = "overlap"  // skipped: due while the intent was busy
	ResultOverflow FireResult = "overflow" // over the catch-up bound: skipped, or deferred
	ResultError    FireResult = "error"    // the target could not start or failed
	ResultHeld     FireResult = "held"     // stopped before running: converged, or paused meanwhile
)

// FireRecord is one fire as the intent remembers it.
type FireRecord struct {
	ID      string     `json:"id"`
	Kind    FireKind   `json:"kind"`
	Nominal time.Time  `json:"nominal"`
	Started time.Time  `json:"started"`
	Ended   time.Time  `json:"ended,omitzero"`
	Result  FireResult `json:"result"`
	// Target is the target workflow the fire ran (the latest, after
	// retries); Tries how many times it started a target.
	Target  string `json:"target,omitempty"`
	Tries   int    `json:"tries,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Error   string `json:"error,omitempty"`
}

const recentFires = 10

// lateAfter is how long after its time a fire is called a catch-up when
// no later fire time has come yet; it only labels the fire.
const lateAfter = 10 * time.Second

// Admission is whether a fire runs its target, decided when it starts.
type Admission struct {
	Run  bool
	Kind FireKind
	// Result is why a fire that does not run is skipped: ResultOverlap or
	// ResultOverflow.
	Result FireResult
	// Newer counts the fire times, due already, that follow this one in
	// the backlog it belongs to (at most the catch-up bound).
	Newer int
	// Fresh: the fire starts a new stretch (nothing ran just before it).
	Fresh bool
}

// Admit decides whether a fire due at nominal and starting now runs. A
// schedule starts its fires one after another, each when the one before
// has ended, so a fire may start long after its time:
//
//   - due while the latest stretch was running (between BusySince and
//     BusyUntil): the intent was busy with an earlier fire's target, or
//     backing off; it is skipped, as an overlapping fire is;
//   - otherwise it belongs to a backlog of fires missed while nothing
//     could fire (the server or every worker down): of such a backlog only
//     the newest CatchUp run; the others are over the bound (skipped, or
//     folded into the deferred fire);
//   - a person's trigger (a time that is not one of the intent's) always
//     runs (the starter refuses one while a fire is under way).
func Admit(st State, s Spec, times Times, nominal, now time.Time) Admission {
	if !times.Matches(nominal) {
		// A trigger: its time is the moment it was asked for, to the
		// second, so it may look due while the fire before it ended.
		return Admission{Run: true, Kind: FireManual, Fresh: true}
	}
	if !st.BusyUntil.IsZero() && !nominal.Before(st.BusySince) && !nominal.After(st.BusyUntil) {
		return Admission{Result: ResultOverlap, Kind: kindOf(nominal, now, 0)}
	}
	fresh := st.BusyUntil.IsZero() || nominal.After(st.BusyUntil)
	// The backlog a fire belongs to ends where its stretch began: fire
	// times after that came while the stretch ran and will be skipped.
	end := now
	if !fresh {
		end = st.BusySince.Add(-time.Nanosecond)
	}
	newer := times.Count(nominal, end, s.CatchUp)
	kind := kindOf(nominal, now, newer)
	if newer >= s.CatchUp {
		return Admission{Result: ResultOverflow, Kind: kind, Newer: newer, Fresh: fresh}
	}
	return Admission{Run: true, Kind: kind, Newer: newer, Fresh: fresh}
}

// kindOf labels a scheduled fire: late when a later time has come, or when
// it starts well after its own.
func kindOf(nominal, now time.Time, newer int) FireKind {
	if newer > 0 || now.Sub(nominal) > lateAfter {
		return FireCatchUp
	}
	return FireScheduled
}

// Reopen is the start of a fire: the schedule fired, so a person resumed
// an intent that was in error or had converged (one that has converged
// for good converges again before it runs).
func (st *State) Reopen() {
	if st.Status == "" || st.Status == StatusError || st.Status == StatusConverged {
		if st.Status == StatusError {
			st.ConsecutiveErrors = 0
		}
		st.Status, st.Reason = StatusActive, ""
	}
}

// Done reports whether the intent has done its job without running again:
// its runs reached max_runs, or its condition holds whatever a next run
// would do (runs>=N). An update can make this so.
func (st *State) Done(s Spec) bool {
	switch {
	case st.Runs >= s.MaxRuns:
		st.converge(fmt.Sprintf("max_runs %d reached", s.MaxRuns))
	case s.Until != nil && s.Until.Holds(Facts{Runs: st.Runs}):
		st.converge(fmt.Sprintf("until %s holds after %d runs", s.Until, st.Runs))
	default:
		return false
	}
	return true
}

// Ran records a run whose target reached an outcome and reports whether
// the intent has converged: its condition holds, or max_runs is reached.
func (st *State) Ran(s Spec, o Outcome) bool {
	st.Runs++
	st.ConsecutiveErrors = 0
	st.LastOutcome = &o
	if o.Attempt > 0 {
		st.LastAttempt = o.Attempt
	}
	switch {
	case s.Until != nil && s.Until.Holds(Facts{Runs: st.Runs, Completed: o.Completed}):
		st.converge(fmt.Sprintf("until %s holds after run %d (%s)", s.Until, st.Runs, o))
	case st.Runs >= s.MaxRuns:
		st.converge(fmt.Sprintf("max_runs %d reached (%s)", s.MaxRuns, o))
	default:
		return false
	}
	return true
}

func (st *State) converge(reason string) {
	st.Status, st.Reason = StatusConverged, reason
}

// Failed records a failed attempt at a fire. When it is the MaxErrors-th
// in a row the circuit opens (the intent turns error, open is true);
// otherwise the fire tries again after wait.
func (st *State) Failed(s Spec, problem string) (open bool, wait time.Duration) {
	st.Errors++
	st.ConsecutiveErrors++
	if st.ConsecutiveErrors >= s.MaxErrors {
		st.Status = StatusError
		st.Reason = fmt.Sprintf("%d consecutive failed fires; last: %s", st.ConsecutiveErrors, problem)
		return true, 0
	}
	return false, Backoff(s.MinInterval.D(), st.ConsecutiveErrors)
}

// Missed takes the schedule's count of fires missed outside the catch-up
// window. Under defer, those not seen before join the deferred fire.
func (st *State) Missed(s Spec, count int) {
	if count > st.MissedSeen && s.Overflow == OverflowDefer {
		st.Deferred += count - st.MissedSeen
	}
	st.MissedSeen = max(st.MissedSeen, count)
}

// Record adds a fire to the recent ones, keeping the latest recentFires.
func (st *State) Record(f FireRecord) {
	st.Fires++
	if f.Result == ResultOverlap || f.Result == ResultOverflow {
		st.Skipped++
	}
	st.Recent = append(st.Recent, f)
	if n := len(st.Recent) - recentFires; n > 0 {
		st.Recent = append([]FireRecord(nil), st.Recent[n:]...)
	}
}

// Backoff is the wait after the n-th failed attempt in a row: the minimum
// interval, doubled for each further failure, at most MaxBackoff.
func Backoff(minInterval time.Duration, n int) time.Duration {
	d := max(minInterval, time.Second)
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// Notes are what a paused schedule's note says; its first word is the
// status, the rest is for a person.
const (
	notePrefixError     = "error: "
	notePrefixConverged = "converged: "
)

// ErrorNote is the note of an intent whose circuit opened.
func ErrorNote(reason string) string { return notePrefixError + reason }

// ConvergedNote is the note of an intent that has done its job.
func ConvergedNote(reason string) string { return notePrefixConverged + reason }

// StatusOf is the status a person sees: a paused schedule is in error or
// converged as its note says, or paused by a person; a running one is
// active.
func StatusOf(paused bool, note string) Status {
	switch {
	case !paused:
		return StatusActive
	case strings.HasPrefix(note, notePrefixError):
		return StatusError
	case strings.HasPrefix(note, notePrefixConverged):
		return StatusConverged
	}
	return StatusPaused
}
