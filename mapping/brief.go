package mapping

import (
	"fmt"
	"math"
	"strings"
)

// Brief phase statuses, 1:1 with edda's PhaseStatus (docs/contract.md 5.1).
const (
	PhasePending  = "pending"
	PhaseRunning  = "running"
	PhaseChecking = "checking"
	PhasePassed   = "passed"
	PhaseFailed   = "failed"
	PhaseSkipped  = "skipped"
	PhaseStale    = "stale"
)

// DefaultLogLimit is how many log entries a brief keeps; every patch that
// adds one carries the whole log (karvi replaces arrays), so the log must
// stay bounded.
const DefaultLogLimit = 500

// MaxLogDetailBytes bounds one log entry's detail; longer text is cut at a
// rune boundary and marked. An event's texts may be 4 KB each and a detail
// joins up to three, so without it 500 entries could reach megabytes: the
// brief travels in every delivery's input and result in workflow history,
// where the server ends a workflow whose payload passes 2 MB. The phase
// keeps the error or reason whole.
const MaxLogDetailBytes = 256

// Brief is the task's brief on karvi, field for field as docs/contract.md
// (5.1) lists it.
type Brief struct {
	Meta            BriefMeta             `json:"meta"`
	Plan            BriefPlan             `json:"plan"`
	Phases          map[string]BriefPhase `json:"phases"`
	CurrentPhase    string                `json:"currentPhase,omitempty"`
	CompletedPhases int                   `json:"completedPhases"`
	Cost            BriefCost             `json:"cost"`
	Artifacts       []string              `json:"artifacts"`
	Log             []LogEntry            `json:"log"`
}

// BriefMeta is the scoped-board header. UpdatedAt is stamped by the sink
// (karvi stamps it on every write), never by the reducer.
type BriefMeta struct {
	BoardType string `json:"boardType"`
	Version   int    `json:"version"`
	TaskID    string `json:"taskId"`
	Runtime   string `json:"runtime"`
	UpdatedAt string `json:"updatedAt,omitempty"`
}

// BriefPlan describes the generated plan.
type BriefPlan struct {
	Source      string   `json:"source"`
	Name        string   `json:"name"`
	TotalPhases int      `json:"totalPhases"`
	BudgetUSD   *float64 `json:"budget_usd,omitempty"`
}

// BriefPhase is one phase's progress.
type BriefPhase struct {
	Status      string   `json:"status"`
	Attempts    int      `json:"attempts,omitempty"`
	DurationMS  *int64   `json:"duration_ms,omitempty"`
	CostUSD     *float64 `json:"cost_usd,omitempty"`
	StartedAt   string   `json:"startedAt,omitempty"`
	CompletedAt string   `json:"completedAt,omitempty"`
	Error       string   `json:"error,omitempty"`
	Reason      string   `json:"reason,omitempty"`
}

// BriefCost is spending so far.
type BriefCost struct {
	TotalUSD *float64           `json:"total_usd,omitempty"`
	ByPhase  map[string]float64 `json:"by_phase"`
}

// LogEntry is one brief log line.
type LogEntry struct {
	Time   string `json:"time"`
	Agent  string `json:"agent"`
	Action string `json:"action"`
	Detail string `json:"detail"`
}

// Failure remembers the latest phase failure from the event stream, for the
// outcome wording when the conductor ends without a usable state.json error.
type Failure struct {
	PhaseID   string `json:"phaseId"`
	Attempt   int    `json:"attempt"`
	Error     string `json:"error"`
	ErrorType string `json:"errorType,omitempty"`
}

// BriefState is everything the workflow carries to build brief patches. It
// round-trips through JSON (workflow history) unchanged, and the code that
// updates it never ranges over a map: PhaseOrder gives the order.
type BriefState struct {
	Brief      Brief    `json:"brief"`
	PhaseOrder []string `json:"phaseOrder"`
	Applied    Position `json:"applied"`
	HasApplied bool     `json:"hasApplied"`
	LogLimit   int      `json:"logLimit"`
	// ResetPrevious makes InitPatch overwrite what an earlier attempt left
	// in karvi's brief (see InitPatch). StalePhases are phase ids of earlier
	// attempts that the current plan does not have.
	ResetPrevious bool     `json:"resetPrevious,omitempty"`
	StalePhases   []string `json:"stalePhases,omitempty"`
	LastFailure   *Failure `json:"lastFailure,omitempty"`
}

// NewBriefState builds the skeleton brief for a plan: every phase pending,
// nothing spent, empty log.
func NewBriefState(taskID string, s PlanSummary) BriefState {
	order := make([]string, 0, len(s.PhaseIDs))
	phases := make(map[string]BriefPhase, len(s.PhaseIDs))
	for _, id := range s.PhaseIDs {
		if _, dup := phases[id]; dup {
			continue
		}
		order = append(order, id)
		phases[id] = BriefPhase{Status: PhasePending}
	}
	var budget *float64
	if s.BudgetUSD != nil {
		b := *s.BudgetUSD
		budget = &b
	}
	return BriefState{
		Brief: Brief{
			Meta:      BriefMeta{BoardType: "brief", Version: 1, TaskID: taskID, Runtime: "edda"},
			Plan:      BriefPlan{Source: "generated", Name: s.Name, TotalPhases: len(order), BudgetUSD: budget},
			Phases:    phases,
			Cost:      BriefCost{ByPhase: map[string]float64{}},
			Artifacts: []string{},
			Log:       []LogEntry{},
		},
		PhaseOrder:    order,
		LogLimit:      DefaultLogLimit,
		ResetPrevious: s.Redispatch,
	}
}

// ForgetPrevious prepares a new attempt's state to wipe the previous
// attempt's brief: InitPatch will reset every field the reducer writes and
// null the previous attempt's phases that this plan lacks.
func (s *BriefState) ForgetPrevious(prev BriefState) {
	s.ResetPrevious = true
	for _, id := range append(append([]string(nil), prev.PhaseOrder...), prev.StalePhases...) {
		if !contains(s.PhaseOrder, id) && !contains(s.StalePhases, id) {
			s.StalePhases = append(s.StalePhases, id)
		}
	}
}

// Change says what reducing one event changed in the brief. It is the
// projection-neutral result of the reducer: an encoder turns it into a wire
// format (karvi's PATCH body, see BriefEncoder) by reading the changed parts
// from the brief itself.
type Change struct {
	// Pos is the event's position; Type its normalised type, or a
	// reducer-made type such as PatchTypeSettle.
	Pos  Position
	Type string
	// Fields are the top-level parts of the brief that changed.
	Fields BriefFields
	// Phases are the phases whose fields changed, in the brief's phase order.
	Phases []PhaseChange
}

// BriefFields is a set of top-level brief parts.
type BriefFields uint8

// The top-level parts of a brief a change can touch.
const (
	ChangedPlan BriefFields = 1 << iota
	ChangedCurrentPhase
	ChangedCompletedPhases
	ChangedTotalCost
	ChangedLog
)

// PhaseFields is a set of one phase's fields.
type PhaseFields uint16

// The fields of a brief phase a change can touch. ChangedPhaseCost is the
// phase's entry in cost.by_phase.
const (
	ChangedStatus PhaseFields = 1 << iota
	ChangedAttempts
	ChangedDuration
	ChangedCost
	ChangedStartedAt
	ChangedCompletedAt
	ChangedError
	ChangedReason
	ChangedPhaseCost
)

// PhaseChange names one phase and which of its fields changed.
type PhaseChange struct {
	ID     string
	Fields PhaseFields
}

// Reduce folds one event into the brief (docs/contract.md, "Events to
// brief") and says what changed. It returns false and leaves the state
// untouched when the event is not after the last applied position (a
// replay) or changes nothing in the brief (plan_aborted: the task status
// changes instead).
func (s *BriefState) Reduce(ev Event) (Change, bool) {
	if s.HasApplied && !s.Applied.Less(ev.Pos) {
		return Change{}, false
	}
	reduce, declared := briefReducers[ev.Type]
	if declared && reduce == nil {
		return Change{}, false
	}
	s.ensure()
	c := Change{Pos: ev.Pos, Type: ev.Type, Fields: ChangedLog}
	phase, known := s.Brief.Phases[ev.PhaseID]
	known = known && ev.PhaseID != ""
	var pf PhaseFields
	applied := false
	if reduce != nil {
		pf, applied = reduce(s, ev, &c, &phase, known)
	}
	if !applied {
		// Unknown types (gate_entered, ...) and phase events for phases the
		// plan does not have only leave a trace in the log.
		s.appendLog(ev, otherDetail(ev))
	}
	if pf != 0 {
		s.Brief.Phases[ev.PhaseID] = phase
		c.Phases = []PhaseChange{{ID: ev.PhaseID, Fields: pf}}
	}
	s.Brief.CompletedPhases = s.completed()
	s.Applied = ev.Pos
	s.HasApplied = true
	return c, true
}

// briefReducer folds one event of its type into the brief, writing the
// event's phase (its current value in phase; known says the plan has it)
// and the top-level parts it changes in c. It returns the phase's fields it
// changed, and false when the event does not apply, which leaves only a
// trace in the log.
type briefReducer func(s *BriefState, ev Event, c *Change, phase *BriefPhase, known bool) (PhaseFields, bool)

// briefReducers says how the brief takes each of EventTypes; nil: the
// event changes nothing in the brief.
var briefReducers = map[string]briefReducer{
	EventPlanStart:     reducePlanStart,
	EventPhaseStart:    reducePhaseStart,
	EventPhasePassed:   reducePhasePassed,
	EventPhaseFailed:   reducePhaseFailed,
	EventPhaseSkipped:  reducePhaseSkipped,
	EventPlanCompleted: reducePlanCompleted,
	EventPlanAborted:   nil, // the task status changes instead
}

func reducePlanStart(s *BriefState, ev Event, c *Change, _ *BriefPhase, _ bool) (PhaseFields, bool) {
	// The name we generated wins: the document's events say "karvi-T5"
	// where the real conductor runs our kebab-case name. The event's name
	// only fills a state that has none.
	if s.Brief.Plan.Name == "" {
		s.Brief.Plan.Name = ev.PlanName
	}
	if ev.PhaseCount > 0 {
		s.Brief.Plan.TotalPhases = ev.PhaseCount
	}
	c.Fields |= ChangedPlan | ChangedCompletedPhases
	s.appendLog(ev, plural(s.Brief.Plan.TotalPhases, "phase"))
	return 0, true
}

func reducePhaseStart(s *BriefState, ev Event, c *Change, phase *BriefPhase, known bool) (PhaseFields, bool) {
	if !known {
		return 0, false
	}
	phase.Status = PhaseRunning
	pf := ChangedStatus
	if ev.Attempt > 0 {
		phase.Attempts = ev.Attempt
		pf |= ChangedAttempts
	}
	if ev.TS != "" {
		phase.StartedAt = ev.TS
		pf |= ChangedStartedAt
	}
	s.Brief.CurrentPhase = ev.PhaseID
	c.Fields |= ChangedCurrentPhase
	detail := ev.PhaseID
	if ev.Attempt > 1 {
		detail = fmt.Sprintf("%s (attempt %d)", ev.PhaseID, ev.Attempt)
	}
	s.appendLog(ev, detail)
	return pf, true
}

func reducePhasePassed(s *BriefState, ev Event, c *Change, phase *BriefPhase, known bool) (PhaseFields, bool) {
	if !known {
		return 0, false
	}
	phase.Status = PhasePassed
	pf := ChangedStatus | ChangedDuration
	if ev.Attempt > 0 {
		phase.Attempts = ev.Attempt
		pf |= ChangedAttempts
	}
	d := ev.DurationMS
	phase.DurationMS = &d
	if ev.CostUSD != nil {
		// The phase's failed attempts may already count (ApplySpend): the
		// passing attempt's own cost never lowers the phase's.
		cost := max(*ev.CostUSD, s.Brief.Cost.ByPhase[ev.PhaseID])
		phase.CostUSD = &cost
		s.Brief.Cost.ByPhase[ev.PhaseID] = cost
		pf |= ChangedCost | ChangedPhaseCost
	}
	if ev.TS != "" {
		phase.CompletedAt = ev.TS
		pf |= ChangedCompletedAt
	}
	if s.LastFailure != nil && s.LastFailure.PhaseID == ev.PhaseID {
		s.LastFailure = nil
	}
	c.Fields |= ChangedCompletedPhases
	detail := fmt.Sprintf("%s (%ds", ev.PhaseID, int64(math.Round(float64(ev.DurationMS)/1000)))
	if ev.CostUSD != nil {
		detail += fmt.Sprintf(", $%.2f", *ev.CostUSD)
	}
	s.appendLog(ev, detail+")")
	return pf, true
}

func reducePhaseFailed(s *BriefState, ev Event, _ *Change, phase *BriefPhase, known bool) (PhaseFields, bool) {
	if !known {
		return 0, false
	}
	phase.Status = PhaseFailed
	pf := ChangedStatus
	if ev.Attempt > 0 {
		phase.Attempts = ev.Attempt
		pf |= ChangedAttempts
	}
	if msg := StripErrorPrefix(ev.Error); msg != "" {
		phase.Error = msg
		pf |= ChangedError
	}
	s.LastFailure = &Failure{PhaseID: ev.PhaseID, Attempt: ev.Attempt, Error: ev.Error, ErrorType: errorTypeOf(ev)}
	detail := ev.PhaseID
	if ev.Attempt > 0 {
		detail = fmt.Sprintf("%s (attempt %d)", ev.PhaseID, ev.Attempt)
	}
	if ev.Error != "" {
		detail += ": " + ev.Error
	}
	s.appendLog(ev, detail)
	return pf, true
}

func reducePhaseSkipped(s *BriefState, ev Event, c *Change, phase *BriefPhase, known bool) (PhaseFields, bool) {
	if !known {
		return 0, false
	}
	phase.Status = PhaseSkipped
	pf := ChangedStatus
	if ev.Reason != "" {
		phase.Reason = ev.Reason
		pf |= ChangedReason
	}
	if s.LastFailure != nil && s.LastFailure.PhaseID == ev.PhaseID {
		s.LastFailure = nil
	}
	c.Fields |= ChangedCompletedPhases
	detail := ev.PhaseID
	if ev.Reason != "" {
		detail += ": " + ev.Reason
	}
	s.appendLog(ev, detail)
	return pf, true
}

func reducePlanCompleted(s *BriefState, ev Event, c *Change, _ *BriefPhase, _ bool) (PhaseFields, bool) {
	var total float64
	if ev.TotalCostUSD != nil {
		total = *ev.TotalCostUSD
	} else {
		for _, id := range s.PhaseOrder {
			total += s.Brief.Cost.ByPhase[id]
		}
		total = roundCents(total)
	}
	if prev := s.Brief.Cost.TotalUSD; prev != nil && *prev > total {
		total = *prev // state.json said more at a checkpoint
	}
	s.Brief.Cost.TotalUSD = &total
	c.Fields |= ChangedTotalCost
	s.appendLog(ev, fmt.Sprintf("%s passed, $%.2f", plural(ev.PhasesPassed, "phase"), total))
	return 0, true
}

// ensure repairs a state that did not come from NewBriefState (a zero value
// or one decoded from JSON with nulls) so Apply never writes to a nil map.
func (s *BriefState) ensure() {
	if s.Brief.Phases == nil {
		s.Brief.Phases = map[string]BriefPhase{}
	}
	if s.Brief.Cost.ByPhase == nil {
		s.Brief.Cost.ByPhase = map[string]float64{}
	}
	if s.Brief.Artifacts == nil {
		s.Brief.Artifacts = []string{}
	}
	if s.Brief.Log == nil {
		s.Brief.Log = []LogEntry{}
	}
}

// completed counts phases whose status is passed or skipped, so a phase
// reported twice counts once.
func (s *BriefState) completed() int {
	n := 0
	for _, id := range s.PhaseOrder {
		switch s.Brief.Phases[id].Status {
		case PhasePassed, PhaseSkipped:
			n++
		}
	}
	return n
}

func (s *BriefState) appendLog(ev Event, detail string) {
	s.appendLogEntry(LogEntry{Time: ev.TS, Agent: "conductor", Action: ev.Type, Detail: detail})
}

func (s *BriefState) appendLogEntry(e LogEntry) {
	e.Detail = truncate(e.Detail, MaxLogDetailBytes)
	limit := s.LogLimit
	if limit <= 0 {
		limit = DefaultLogLimit
	}
	log := append(s.Brief.Log, e)
	if drop := len(log) - limit; drop > 0 {
		// Reslicing keeps appends amortized O(1) once the log is full; the
		// dropped entries are released when the next append reallocates,
		// so at most about limit/2 of them are retained meanwhile.
		log = log[drop:]
	}
	s.Brief.Log = log
}

func otherDetail(ev Event) string {
	var parts []string
	for _, p := range []string{ev.PhaseID, ev.Error, ev.Reason} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ": ")
}

// errorPrefixes are the error-type prefixes edda puts before a phase error
// message; the brief shows the message alone (example B's fifth patch).
var errorPrefixes = []struct{ prefix, errType string }{
	{"check failed: ", "check_failed"},
	{"check_failed: ", "check_failed"},
	{"agent crashed: ", "agent_crash"},
	{"agent crash: ", "agent_crash"},
	{"agent_crash: ", "agent_crash"},
	{"timeout: ", "timeout"},
	{"timed out: ", "timeout"},
	{"budget exceeded: ", "budget_exceeded"},
	{"budget_exceeded: ", "budget_exceeded"},
	{"user abort: ", "user_abort"},
	{"user_abort: ", "user_abort"},
}

// StripErrorPrefix removes a leading error-type prefix such as
// "check failed: " (case-insensitive).
func StripErrorPrefix(msg string) string {
	for _, p := range errorPrefixes {
		if len(msg) >= len(p.prefix) && strings.EqualFold(msg[:len(p.prefix)], p.prefix) {
			return msg[len(p.prefix):]
		}
	}
	return msg
}

// errorTypeOf is the event's error_type, else the type its message prefix
// names, else "".
func errorTypeOf(ev Event) string {
	if ev.ErrorType != "" {
		return NormalizeEventType(ev.ErrorType)
	}
	for _, p := range errorPrefixes {
		if len(ev.Error) >= len(p.prefix) && strings.EqualFold(ev.Error[:len(p.prefix)], p.prefix) {
			return p.errType
		}
	}
	return ""
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// roundCents drops float noise from sums (0.85+0.42+0.18 is not 1.45 in
// binary) without hiding sub-cent amounts.
func roundCents(f float64) float64 {
	return math.Round(f*1e6) / 1e6
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
