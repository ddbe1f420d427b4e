package mapping

import (
	"fmt"
	"strings"
)

// PatchTypeSettle is the Type of the patch that settles the brief at the end
// of an attempt (BriefState.Settle).
const PatchTypeSettle = "settle"

// SettleAgent is the log agent of the settling entry: the bridge, not the
// conductor, wrote it.
const SettleAgent = "bridge"

// Settle makes the brief agree with how the attempt ended (docs/contract.md
// 5.6). The events alone leave a brief behind whenever the conductor stops
// without reporting a phase's end: edda writes no event when a phase goes
// stale, and a crashed, killed or aborted conductor writes nothing at all,
// so the phase it was running would read "running" forever on a task karvi
// shows blocked.
//
// For each phase, in plan order:
//   - state.json (cs, nil when unreadable or not read) says where the phase
//     settled (pending, passed, failed, skipped, stale): the brief takes that
//     status, its attempts when above 0, its error (without the error-type
//     prefix, as the brief shows errors) and its skip reason; a stale phase
//     without any error reads "timed out";
//   - otherwise a phase the brief shows running or checking (or pending,
//     while state.json has it running or checking) was interrupted: it
//     becomes failed (stale when the outcome is a timeout) with the
//     outcome's lastError as its error, or passed when the plan completed;
//     an end the events reported stands.
//
// A running or checking status in state.json is not trusted: the conductor
// that wrote it is gone, and it saves state.json after writing the event of
// a phase's end, so the event may be the newer word.
//
// It returns false, leaving the state untouched, when the brief already
// agrees: a settle that changes nothing sends nothing. Otherwise the change
// lists every phase it touched and adds one log entry (agent "bridge",
// action "settle", time at) saying what moved.
func (s *BriefState) Settle(o Outcome, cs *ConductorState, at string) (Change, bool) {
	s.ensure()
	var states map[string]PhaseState
	if cs != nil {
		states = make(map[string]PhaseState, len(cs.Phases))
		for _, ph := range cs.Phases {
			if _, dup := states[ph.ID]; !dup {
				states[ph.ID] = ph
			}
		}
	}
	c := Change{Pos: s.Applied, Type: PatchTypeSettle}
	var moved []string
	for _, id := range s.PhaseOrder {
		was := s.Brief.Phases[id]
		now, ok := settlePhase(was, states[id], o)
		if !ok {
			continue
		}
		var pf PhaseFields
		if now.Status != was.Status {
			pf |= ChangedStatus
		}
		if now.Attempts != was.Attempts {
			pf |= ChangedAttempts
		}
		if now.Error != was.Error {
			pf |= ChangedError
		}
		if now.Reason != was.Reason {
			pf |= ChangedReason
		}
		if pf == 0 {
			continue
		}
		// A patch names the status with every changed field, so a reader
		// of one body alone sees what the phase is now.
		pf |= ChangedStatus
		s.Brief.Phases[id] = now
		c.Phases = append(c.Phases, PhaseChange{ID: id, Fields: pf})
		moved = append(moved, settleDetail(id, was, now))
	}
	if len(c.Phases) == 0 {
		return Change{}, false
	}
	if done := s.completed(); done != s.Brief.CompletedPhases {
		s.Brief.CompletedPhases = done
		c.Fields |= ChangedCompletedPhases
	}
	c.Fields |= ChangedLog
	s.appendLogEntry(LogEntry{Time: at, Agent: SettleAgent, Action: PatchTypeSettle, Detail: strings.Join(moved, "; ")})
	return c, true
}

// settlePhase is where one phase ends up; false when nothing says it should
// move. sp is the phase in state.json, zero when there is none.
func settlePhase(p BriefPhase, sp PhaseState, o Outcome) (BriefPhase, bool) {
	switch sp.Status {
	case PhasePending, PhasePassed, PhaseFailed, PhaseSkipped, PhaseStale:
		p.Status = sp.Status
		if sp.Attempts > 0 {
			p.Attempts = sp.Attempts
		}
		if sp.Error != nil {
			if msg := StripErrorPrefix(strings.TrimSpace(sp.Error.Message)); msg != "" {
				p.Error = msg
			}
		}
		if p.Status == PhaseStale && p.Error == "" {
			p.Error = "timed out"
		}
		if sp.Status == PhaseSkipped && sp.SkipReason != "" {
			p.Reason = sp.SkipReason
		}
		return p, true
	}
	// An end the events reported stands; a phase they show under way, or
	// not yet started while state.json has it under way, was interrupted.
	interrupted := p.Status == PhaseRunning || p.Status == PhaseChecking ||
		(p.Status == PhasePending && (sp.Status == PhaseRunning || sp.Status == PhaseChecking))
	if !interrupted {
		return p, false
	}
	p.Attempts = max(p.Attempts, sp.Attempts)
	switch {
	case o.TaskStatus == TaskCompleted:
		// The conductor completes a plan only once every phase passed or
		// was skipped, and a phase it ran was not skipped: the event that
		// said so was lost (a torn line, say).
		p.Status = PhasePassed
		return p, true
	case o.ErrorType == ErrTimeout:
		p.Status = PhaseStale
	default:
		p.Status = PhaseFailed
	}
	switch {
	case o.LastError != "":
		p.Error = o.LastError
	case p.Error == "":
		p.Error = "the conductor stopped before this phase ended"
	}
	return p, true
}

// settleDetail words one settled phase for the log: "test failed (was
// running): Plan aborted by user".
func settleDetail(id string, was, now BriefPhase) string {
	d := id + " " + now.Status
	if was.Status != now.Status {
		d += fmt.Sprintf(" (was %s)", was.Status)
	}
	if now.Error != "" && now.Error != was.Error {
		d += ": " + now.Error
	}
	return d
}

// Clone is a copy of the state that shares nothing a reducer writes to, so
// one of the two can change without the other seeing it. Like the reducer it
// walks PhaseOrder, not the maps: the reducer keeps no other keys there.
func (s BriefState) Clone() BriefState {
	c := s
	if s.Brief.Phases != nil {
		c.Brief.Phases = make(map[string]BriefPhase, len(s.PhaseOrder))
	}
	if s.Brief.Cost.ByPhase != nil {
		c.Brief.Cost.ByPhase = make(map[string]float64, len(s.Brief.Cost.ByPhase))
	}
	for _, id := range s.PhaseOrder {
		if p, ok := s.Brief.Phases[id]; ok {
			c.Brief.Phases[id] = p
		}
		if v, ok := s.Brief.Cost.ByPhase[id]; ok {
			c.Brief.Cost.ByPhase[id] = v
		}
	}
	c.Brief.Artifacts = cloneSlice(s.Brief.Artifacts)
	c.Brief.Log = cloneSlice(s.Brief.Log)
	c.PhaseOrder = cloneSlice(s.PhaseOrder)
	c.StalePhases = cloneSlice(s.StalePhases)
	if s.LastFailure != nil {
		f := *s.LastFailure
		c.LastFailure = &f
	}
	return c
}

// cloneSlice copies a slice, keeping nil and empty apart (they encode
// differently).
func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}
