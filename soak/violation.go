package soak

import (
	"fmt"
	"sort"
	"time"
)

// Invariant names one rule the soak checks. The names appear in reports,
// so they never change.
type Invariant string

// The invariants, in the order a report lists them.
const (
	// InvConductorKeptWhileWanted: no conductor is stopped while its
	// workflow wants it running.
	InvConductorKeptWhileWanted Invariant = "conductor-kept-while-wanted"
	// InvOneConductorPerAttempt: never two live conductors for one attempt.
	InvOneConductorPerAttempt Invariant = "one-conductor-per-attempt"
	// InvNoProcessOutlivesAttempt: no conductor lives on after its attempt
	// ended (the workflow closed or moved to a later attempt), beyond a
	// grace.
	InvNoProcessOutlivesAttempt Invariant = "no-process-outlives-attempt"
	// InvUsageLimitPauseUntilReset: a usage-limit pause ends at or after
	// its reset, unless a person resumed it.
	InvUsageLimitPauseUntilReset Invariant = "usage-limit-pause-until-reset"
	// InvBudgetPauseUntilRaised: a budget pause ends only when its budget
	// is raised or a person resumes the task.
	InvBudgetPauseUntilRaised Invariant = "budget-pause-until-raised"
	// InvSpendWithinBlockingBudget: spend never passes a blocking budget
	// by more than the phase in flight.
	InvSpendWithinBlockingBudget Invariant = "spend-within-blocking-budget"
	// InvCostsAgree: the job view's step costs add up to the brief's total
	// and to state.json's.
	InvCostsAgree Invariant = "costs-agree"
	// InvEndsOnceAndAgrees: every task ends exactly once, and karvi's
	// status, the brief, status.json and the workflow agree.
	InvEndsOnceAndAgrees Invariant = "ends-once-and-agrees"
	// InvBriefLogMatchesEvents: each brief's log equals its events.jsonl
	// one for one.
	InvBriefLogMatchesEvents Invariant = "brief-log-matches-events"
	// InvWebhookIDsUnique: webhook ids never repeat.
	InvWebhookIDsUnique Invariant = "webhook-ids-unique"
	// InvNothingLeftRunning: nothing is left running at the end
	// (conductors, agent children, workers, servers).
	InvNothingLeftRunning Invariant = "nothing-left-running"
)

// Invariants lists every invariant in report order.
func Invariants() []Invariant {
	return []Invariant{
		InvConductorKeptWhileWanted, InvOneConductorPerAttempt,
		InvNoProcessOutlivesAttempt, InvUsageLimitPauseUntilReset,
		InvBudgetPauseUntilRaised, InvSpendWithinBlockingBudget,
		InvCostsAgree, InvEndsOnceAndAgrees, InvBriefLogMatchesEvents,
		InvWebhookIDsUnique, InvNothingLeftRunning,
	}
}

// Violation is one breach of an invariant. Task is empty for a breach
// that belongs to no task (a leftover worker). At is when it happened or
// was seen, zero when only the end state shows it.
type Violation struct {
	Invariant Invariant `json:"invariant"`
	Task      string    `json:"task,omitempty"`
	Evidence  string    `json:"evidence"`
	At        time.Time `json:"at,omitzero"`
}

func (v Violation) String() string {
	s := string(v.Invariant)
	if v.Task != "" {
		s += " task=" + v.Task
	}
	if !v.At.IsZero() {
		s += " at=" + v.At.UTC().Format(time.RFC3339Nano)
	}
	return s + ": " + v.Evidence
}

func violation(inv Invariant, task string, at time.Time, format string, args ...any) Violation {
	return Violation{Invariant: inv, Task: task, At: at, Evidence: fmt.Sprintf(format, args...)}
}

// SortViolations orders violations by invariant (report order), task,
// time and evidence, so a report is stable across runs of one seed.
func SortViolations(vs []Violation) {
	rank := map[Invariant]int{}
	for i, inv := range Invariants() {
		rank[inv] = i
	}
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if rank[a.Invariant] != rank[b.Invariant] {
			return rank[a.Invariant] < rank[b.Invariant]
		}
		if a.Task != b.Task {
			return a.Task < b.Task
		}
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return a.Evidence < b.Evidence
	})
}
