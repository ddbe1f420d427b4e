package mapping

import "encoding/json"

// PatchTypeInit is the Type of the skeleton patch.
const PatchTypeInit = "init"

// Patch is one PATCH /api/brief/:taskId body and the change it came from.
type Patch struct {
	Pos  Position        `json:"pos"`
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

// BriefEncoder turns brief changes into karvi PATCH bodies. karvi merges a
// PATCH into the stored brief: objects merge key by key, while arrays and
// scalars replace. So a body carries exactly the fields a change touched,
// and the whole log whenever the log changed.
//
// Every body carries the whole log, so the encoder keeps each log entry's
// encoding and writes an entry once instead of once per event. The cache
// is not state: a zero BriefEncoder (after continue-as-new, or on another
// worker) produces the same bytes, only slower for its first body.
type BriefEncoder struct {
	log []encodedEntry
}

// Patch encodes a change as the PATCH body that brings karvi's brief to s.
// Keys keep the order the contract's examples show: plan, phases,
// currentPhase, completedPhases, cost, log.
func (e *BriefEncoder) Patch(s *BriefState, c Change) Patch {
	b := &s.Brief
	body := make(obj, 0, 6)
	if c.Fields&ChangedPlan != 0 {
		body = append(body, kv{"plan", obj{{"name", b.Plan.Name}, {"totalPhases", b.Plan.TotalPhases}}})
	}
	byPhase := obj(nil)
	if len(c.Phases) > 0 {
		phases := make(obj, 0, len(c.Phases))
		for _, pc := range c.Phases {
			phases = append(phases, kv{pc.ID, phaseFields(b.Phases[pc.ID], pc.Fields)})
			if pc.Fields&ChangedPhaseCost != 0 {
				byPhase = append(byPhase, kv{pc.ID, b.Cost.ByPhase[pc.ID]})
			}
		}
		body = append(body, kv{"phases", phases})
	}
	if c.Fields&ChangedCurrentPhase != 0 {
		if b.CurrentPhase == "" {
			body = append(body, kv{"currentPhase", nil})
		} else {
			body = append(body, kv{"currentPhase", b.CurrentPhase})
		}
	}
	if c.Fields&ChangedCompletedPhases != 0 {
		body = append(body, kv{"completedPhases", b.CompletedPhases})
	}
	if c.Fields&ChangedTotalCost != 0 || byPhase != nil {
		cost := make(obj, 0, 2)
		if c.Fields&ChangedTotalCost != 0 && b.Cost.TotalUSD != nil {
			cost = append(cost, kv{"total_usd", *b.Cost.TotalUSD})
		}
		if byPhase != nil {
			cost = append(cost, kv{"by_phase", byPhase})
		}
		body = append(body, kv{"cost", cost})
	}
	size := 256
	if c.Fields&ChangedLog != 0 {
		log := e.encodedLog(b.Log)
		body = append(body, kv{"log", log})
		size += log.size()
	}
	return Patch{Pos: c.Pos, Type: c.Type, Body: body.bytesCap(size)}
}

// phaseFields writes the changed fields of one phase, in the brief's field
// order.
func phaseFields(p BriefPhase, f PhaseFields) obj {
	o := make(obj, 0, 6)
	if f&ChangedStatus != 0 {
		o = append(o, kv{"status", p.Status})
	}
	if f&ChangedAttempts != 0 {
		o = append(o, kv{"attempts", p.Attempts})
	}
	if f&ChangedDuration != 0 && p.DurationMS != nil {
		o = append(o, kv{"duration_ms", *p.DurationMS})
	}
	if f&ChangedCost != 0 && p.CostUSD != nil {
		o = append(o, kv{"cost_usd", *p.CostUSD})
	}
	if f&ChangedStartedAt != 0 {
		o = append(o, kv{"startedAt", p.StartedAt})
	}
	if f&ChangedCompletedAt != 0 {
		o = append(o, kv{"completedAt", p.CompletedAt})
	}
	if f&ChangedError != 0 {
		o = append(o, kv{"error", p.Error})
	}
	if f&ChangedReason != 0 {
		o = append(o, kv{"reason", p.Reason})
	}
	return o
}

// Init is the skeleton as one PATCH body, sent before any event patch.
//
// A fresh brief needs only the skeleton. When ResetPrevious is set (a
// redispatch) the body also sets every key the reducer may have written in
// the earlier attempt to a reset value: each phase gets attempts,
// duration_ms, cost_usd, startedAt, completedAt, error and reason as null;
// currentPhase and cost.total_usd become null; cost.by_phase and phases set
// each StalePhases id to null; log and artifacts are replaced by empty
// arrays and completedPhases by 0. Nothing can delete a key through PATCH,
// so the reset keys stay present as null.
func (e *BriefEncoder) Init(s *BriefState) Patch {
	e.log = e.log[:0]
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

// encodedEntry is one log entry with its JSON encoding.
type encodedEntry struct {
	e LogEntry
	b []byte
}

// encodedLog is a brief's log ready to be written into a body.
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

// encodedLog brings the cache in line with log and returns it. The log
// grows at its end and loses entries at its front once full, so the cache
// first drops the entries that left the front; then every entry is checked
// against the one its encoding was made from. Comparing is cheap (strings
// that share their bytes compare by pointer), and it keeps the encoding
// right whoever changed the log: a stale entry is simply encoded again.
func (e *BriefEncoder) encodedLog(log []LogEntry) encodedLog {
	if log == nil {
		return encodedLog{null: true}
	}
	if len(log) > 0 {
		drop := 0
		for drop < len(e.log) && e.log[drop].e != log[0] {
			drop++
		}
		e.log = e.log[drop:]
	}
	if len(e.log) > len(log) {
		e.log = e.log[:len(log)]
	}
	for i := range log {
		if i == len(e.log) {
			e.log = append(e.log, encodedEntry{e: log[i], b: log[i].appendTo(nil)})
			continue
		}
		if c := &e.log[i]; c.b == nil || c.e != log[i] {
			c.e, c.b = log[i], log[i].appendTo(nil)
		}
	}
	return encodedLog{entries: e.log}
}

// kv and obj build JSON objects whose keys keep the order written, so patch
// bodies are deterministic bytes without maps.
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
