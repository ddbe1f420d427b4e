package mapping

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Brief phase statuses (seed 000 section 3, 1:1 with edda's PhaseStatus).
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

// PatchTypeInit is the Type of the skeleton patch.
const PatchTypeInit = "init"

// Brief is edda's brief, JSON exactly as seed 000 section 3.
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

// Patch is one PATCH /api/brief/:taskId body and the event it came from.
type Patch struct {
	Pos  Position        `json:"pos"`
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
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

	// logJSON caches the encoding of each Brief.Log entry, index for index:
	// every patch body carries the whole log, so each entry is encoded once
	// instead of once per event. It is never serialized; a state decoded
	// from history rebuilds it on its next patch, and a cached entry that no
	// longer matches its log entry is re-encoded (see encodedLog).
	logJSON []encodedEntry
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

// InitPatch is the skeleton as one PATCH body, sent before any event patch.
//
// karvi merges a PATCH into the stored brief: objects merge key by key,
// arrays and scalars replace, null is stored. A fresh brief needs only the
// skeleton. When ResetPrevious is set (a redispatch) the body also sets every
// key the reducer may have written in the earlier attempt to a reset value:
// each phase gets attempts, duration_ms, cost_usd, startedAt, completedAt,
// error and reason as null; currentPhase and cost.total_usd become null;
// cost.by_phase and phases set each StalePhases id to null; log and
// artifacts are replaced by empty arrays and completedPhases by 0. Nothing
// can delete a key through PATCH, so the reset keys stay present as null.
func (s BriefState) InitPatch() Patch {
	b := s.Brief
	meta := obj{{"boardType", b.Meta.BoardType}, {"version", b.Meta.Version}, {"taskId", b.Meta.TaskID}, {"runtime", b.Meta.Runtime}}
	plan := obj{{"source", b.Plan.Source}, {"name", b.Plan.Name}, {"totalPhases", b.Plan.TotalPhases}}
	if b.Plan.BudgetUSD != nil {
		plan = append(plan, kv{"budget_usd", *b.Plan.BudgetUSD})
	} else if s.ResetPrevious {
		plan = append(plan, kv{"budget_usd", nil})
	}
	phases := obj{}
	byPhase := obj{}
	for _, id := range s.PhaseOrder {
		ph := obj{{"status", PhasePending}}
		if s.ResetPrevious {
			ph = append(ph, kv{"attempts", nil}, kv{"duration_ms", nil}, kv{"cost_usd", nil},
				kv{"startedAt", nil}, kv{"completedAt", nil}, kv{"error", nil}, kv{"reason", nil})
			byPhase = append(byPhase, kv{id, nil})
		}
		phases = append(phases, kv{id, ph})
	}
	if s.ResetPrevious {
		for _, id := range s.StalePhases {
			phases = append(phases, kv{id, nil})
			byPhase = append(byPhase, kv{id, nil})
		}
	}
	body := obj{{"meta", meta}, {"plan", plan}, {"phases", phases}}
	if s.ResetPrevious {
		body = append(body, kv{"currentPhase", nil})
	}
	body = append(body, kv{"completedPhases", 0})
	cost := obj{}
	if s.ResetPrevious {
		cost = append(cost, kv{"total_usd", nil})
	}
	cost = append(cost, kv{"by_phase", byPhase})
	body = append(body, kv{"cost", cost}, kv{"artifacts", []string{}}, kv{"log", []LogEntry{}})
	return Patch{Type: PatchTypeInit, Body: body.bytes()}
}

// Apply folds one event into the state (seed 000 section 5) and returns the
// PATCH body for it. It returns false and leaves the state untouched when the
// event is not after the last applied position (a replay) or warrants no
// PATCH (plan_aborted: the task status changes instead).
func (s *BriefState) Apply(ev Event) (Patch, bool) {
	if s.HasApplied && !s.Applied.Less(ev.Pos) {
		return Patch{}, false
	}
	if ev.Type == EventPlanAborted {
		return Patch{}, false
	}
	s.ensure()
	var body obj
	phase, known := s.Brief.Phases[ev.PhaseID]
	known = known && ev.PhaseID != ""
	switch {
	case ev.Type == EventPlanStart:
		// The name we generated wins: the document's events say "karvi-T5"
		// where the real conductor runs our kebab-case name. The event's
		// name only fills a state that has none.
		if s.Brief.Plan.Name == "" {
			s.Brief.Plan.Name = ev.PlanName
		}
		if ev.PhaseCount > 0 {
			s.Brief.Plan.TotalPhases = ev.PhaseCount
		}
		body = obj{
			{"plan", obj{{"name", s.Brief.Plan.Name}, {"totalPhases", s.Brief.Plan.TotalPhases}}},
			{"completedPhases", s.completed()},
		}
		s.appendLog(ev, plural(s.Brief.Plan.TotalPhases, "phase"))

	case ev.Type == EventPhaseStart && known:
		phase.Status = PhaseRunning
		fields := append(make(obj, 0, 6), kv{"status", PhaseRunning})
		if ev.Attempt > 0 {
			phase.Attempts = ev.Attempt
			fields = append(fields, kv{"attempts", ev.Attempt})
		}
		if ev.TS != "" {
			phase.StartedAt = ev.TS
			fields = append(fields, kv{"startedAt", ev.TS})
		}
		s.Brief.Phases[ev.PhaseID] = phase
		s.Brief.CurrentPhase = ev.PhaseID
		body = append(make(obj, 0, 4), kv{"phases", obj{{ev.PhaseID, fields}}}, kv{"currentPhase", ev.PhaseID})
		detail := ev.PhaseID
		if ev.Attempt > 1 {
			detail = fmt.Sprintf("%s (attempt %d)", ev.PhaseID, ev.Attempt)
		}
		s.appendLog(ev, detail)

	case ev.Type == EventPhasePassed && known:
		phase.Status = PhasePassed
		fields := append(make(obj, 0, 6), kv{"status", PhasePassed})
		if ev.Attempt > 0 {
			phase.Attempts = ev.Attempt
			fields = append(fields, kv{"attempts", ev.Attempt})
		}
		d := ev.DurationMS
		phase.DurationMS = &d
		fields = append(fields, kv{"duration_ms", d})
		if ev.CostUSD != nil {
			c := *ev.CostUSD
			phase.CostUSD = &c
			fields = append(fields, kv{"cost_usd", c})
		}
		if ev.TS != "" {
			phase.CompletedAt = ev.TS
			fields = append(fields, kv{"completedAt", ev.TS})
		}
		s.Brief.Phases[ev.PhaseID] = phase
		if s.LastFailure != nil && s.LastFailure.PhaseID == ev.PhaseID {
			s.LastFailure = nil
		}
		body = append(make(obj, 0, 4), kv{"phases", obj{{ev.PhaseID, fields}}}, kv{"completedPhases", s.completed()})
		if ev.CostUSD != nil {
			s.Brief.Cost.ByPhase[ev.PhaseID] = *ev.CostUSD
			body = append(body, kv{"cost", obj{{"by_phase", obj{{ev.PhaseID, *ev.CostUSD}}}}})
		}
		detail := fmt.Sprintf("%s (%ds", ev.PhaseID, int64(math.Round(float64(ev.DurationMS)/1000)))
		if ev.CostUSD != nil {
			detail += fmt.Sprintf(", $%.2f", *ev.CostUSD)
		}
		s.appendLog(ev, detail+")")

	case ev.Type == EventPhaseFailed && known:
		phase.Status = PhaseFailed
		fields := append(make(obj, 0, 6), kv{"status", PhaseFailed})
		if ev.Attempt > 0 {
			phase.Attempts = ev.Attempt
			fields = append(fields, kv{"attempts", ev.Attempt})
		}
		msg := StripErrorPrefix(ev.Error)
		if msg != "" {
			phase.Error = msg
			fields = append(fields, kv{"error", msg})
		}
		s.Brief.Phases[ev.PhaseID] = phase
		s.LastFailure = &Failure{PhaseID: ev.PhaseID, Attempt: ev.Attempt, Error: ev.Error, ErrorType: errorTypeOf(ev)}
		body = append(make(obj, 0, 2), kv{"phases", obj{{ev.PhaseID, fields}}})
		detail := ev.PhaseID
		if ev.Attempt > 0 {
			detail = fmt.Sprintf("%s (attempt %d)", ev.PhaseID, ev.Attempt)
		}
		if ev.Error != "" {
			detail += ": " + ev.Error
		}
		s.appendLog(ev, detail)

	case ev.Type == EventPhaseSkipped && known:
		phase.Status = PhaseSkipped
		fields := append(make(obj, 0, 6), kv{"status", PhaseSkipped})
		if ev.Reason != "" {
			phase.Reason = ev.Reason
			fields = append(fields, kv{"reason", ev.Reason})
		}
		s.Brief.Phases[ev.PhaseID] = phase
		if s.LastFailure != nil && s.LastFailure.PhaseID == ev.PhaseID {
			s.LastFailure = nil
		}
		body = append(make(obj, 0, 4), kv{"phases", obj{{ev.PhaseID, fields}}}, kv{"completedPhases", s.completed()})
		detail := ev.PhaseID
		if ev.Reason != "" {
			detail += ": " + ev.Reason
		}
		s.appendLog(ev, detail)

	case ev.Type == EventPlanCompleted:
		var total float64
		if ev.TotalCostUSD != nil {
			total = *ev.TotalCostUSD
		} else {
			for _, id := range s.PhaseOrder {
				total += s.Brief.Cost.ByPhase[id]
			}
			total = roundCents(total)
		}
		s.Brief.Cost.TotalUSD = &total
		body = append(make(obj, 0, 2), kv{"cost", obj{{"total_usd", total}}})
		s.appendLog(ev, fmt.Sprintf("%s passed, $%.2f", plural(ev.PhasesPassed, "phase"), total))

	default:
		// Unknown types (gate_entered, ...) and phase events for phases the
		// plan does not have only leave a trace in the log.
		s.appendLog(ev, otherDetail(ev))
	}
	s.Brief.CompletedPhases = s.completed()
	log := s.encodedLog()
	body = append(body, kv{"log", log})
	s.Applied = ev.Pos
	s.HasApplied = true
	return Patch{Pos: ev.Pos, Type: ev.Type, Body: body.bytesCap(256 + log.size())}, true
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
	limit := s.LogLimit
	if limit <= 0 {
		limit = DefaultLogLimit
	}
	e := LogEntry{Time: ev.TS, Agent: "conductor", Action: ev.Type, Detail: detail}
	log := append(s.Brief.Log, e)
	enc := e.appendTo(make([]byte, 0, 48+len(e.Time)+len(e.Agent)+len(e.Action)+len(e.Detail)))
	cache := append(s.logJSON, encodedEntry{e: e, b: enc})
	if drop := len(log) - limit; drop > 0 {
		// Reslicing keeps appends amortized O(1) once the log is full; the
		// dropped entries are released when the next append reallocates,
		// so at most about limit/2 of them are retained meanwhile.
		log = log[drop:]
		if drop <= len(cache) {
			cache = cache[drop:]
		}
	}
	s.Brief.Log = log
	s.logJSON = cache
}

// encodedEntry is one log entry with its JSON encoding.
type encodedEntry struct {
	e LogEntry
	b []byte
}

// encodedLog is Brief.Log ready to be written into a body.
type encodedLog struct {
	entries []encodedEntry
	null    bool
}

func (l encodedLog) size() int {
	n := 2
	for _, e := range l.entries {
		n += len(e.b) + 1
	}
	return n
}

func (l encodedLog) appendTo(dst []byte) []byte {
	if l.null {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, e := range l.entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e.b...)
	}
	return append(dst, ']')
}

// encodedLog brings the encoding cache in line with Brief.Log and returns
// it. Comparing an entry with the one it was encoded from is cheap (strings
// that share their bytes compare by pointer), and it makes the cache safe
// whoever changed the log: a stale entry is simply encoded again.
func (s *BriefState) encodedLog() encodedLog {
	log := s.Brief.Log
	if log == nil {
		return encodedLog{null: true}
	}
	if len(s.logJSON) != len(log) {
		s.logJSON = make([]encodedEntry, len(log), cap(log))
	}
	for i := range log {
		if c := &s.logJSON[i]; c.b == nil || c.e != log[i] {
			c.e, c.b = log[i], log[i].appendTo(nil)
		}
	}
	return encodedLog{entries: s.logJSON}
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
// message; the brief shows the message alone (seed example B, PATCH 5).
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

// kv and obj build JSON objects whose keys keep the order written, so patch
// bodies are deterministic bytes in the seed's field order without maps.
type kv struct {
	k string
	v any
}

type obj []kv

func (o obj) MarshalJSON() ([]byte, error) {
	return o.appendTo(nil)
}

// bytes encodes the object. Its values are strings, finite numbers, nested
// objs and log entries, none of which can fail to encode.
func (o obj) bytes() json.RawMessage { return o.bytesCap(256) }

// bytesCap is bytes with a capacity hint, so a body carrying the whole log
// is allocated once.
func (o obj) bytesCap(n int) json.RawMessage {
	b, err := o.appendTo(make([]byte, 0, n))
	if err != nil {
		// Unreachable with the value types used here; keep a valid body
		// rather than panic on input.
		return json.RawMessage(`{}`)
	}
	return b
}
