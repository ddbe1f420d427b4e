package mapping

import (
	"encoding/json"
	"reflect"
	"slices"
)

// SinkHolds reports whether a brief as a sink holds it (decoded JSON) says
// what b says in the parts this project writes: plan, phases,
// currentPhase, completedPhases, cost, artifacts and log, exactly but for
// costs, which may be higher. meta is left out
// (karvi stamps updatedAt on every write), and so are keys whose value is
// null, since a PATCH cannot delete a key and a reset leaves nulls behind.
//
// Every PATCH carries the brief's whole log, and every event adds a log
// entry, so the sink's brief matches the state after exactly one of a run
// of events: the last one it received. Delivery uses that to resume after a
// crash without sending any patch twice (docs/contract.md 5.5).
func SinkHolds(sink map[string]any, b *Brief) bool {
	if sink == nil || !sameLog(sink["log"], b.Log) {
		return false
	}
	data, err := json.Marshal(b)
	if err != nil {
		return false
	}
	var ours map[string]any
	if err := json.Unmarshal(data, &ours); err != nil {
		return false
	}
	for _, k := range []string{"plan", "currentPhase", "completedPhases", "artifacts"} {
		if !reflect.DeepEqual(withoutNulls(sink[k]), withoutNulls(ours[k])) {
			return false
		}
	}
	// A spend patch raises costs without a log entry of its own, so the
	// sink may hold costs above the events' (never below): the phases must
	// agree in all else, and every cost must be at least ours.
	sinkPhases, sinkCosts := splitPhaseCosts(sink["phases"])
	ourPhases, ourCosts := splitPhaseCosts(ours["phases"])
	if !reflect.DeepEqual(sinkPhases, ourPhases) || !atLeast(sinkCosts, ourCosts) {
		return false
	}
	sinkTotal, sinkBy := splitCost(sink["cost"])
	ourTotal, ourBy := splitCost(ours["cost"])
	return atLeast(sinkBy, ourBy) && atLeast(sinkTotal, ourTotal)
}

// splitPhaseCosts returns a brief's phases (decoded JSON) without their
// cost_usd, and those costs by phase.
func splitPhaseCosts(v any) (rest any, costs map[string]float64) {
	phases, ok := withoutNulls(v).(map[string]any)
	if !ok {
		return withoutNulls(v), nil
	}
	costs = map[string]float64{}
	for id, p := range phases {
		ph, ok := p.(map[string]any)
		if !ok {
			continue
		}
		if c, ok := ph["cost_usd"].(float64); ok {
			costs[id] = c
			delete(ph, "cost_usd")
		}
	}
	return phases, costs
}

// splitCost returns a brief's cost (decoded JSON) as its total (under ""
// when set) and its costs by phase.
func splitCost(v any) (total, byPhase map[string]float64) {
	total, byPhase = map[string]float64{}, map[string]float64{}
	c, _ := v.(map[string]any)
	if t, ok := c["total_usd"].(float64); ok {
		total[""] = t
	}
	by, _ := c["by_phase"].(map[string]any)
	for id, x := range by {
		if f, ok := x.(float64); ok {
			byPhase[id] = f
		}
	}
	return total, byPhase
}

// atLeast reports whether every cost of ours is also in sink, at or above.
func atLeast(sink, ours map[string]float64) bool {
	for k, o := range ours {
		if s, ok := sink[k]; !ok || s < o {
			return false
		}
	}
	return true
}

// HeldSpend is the spending a sink's brief (decoded JSON) shows, for a
// resumed delivery to carry on from (BriefState.ApplySpend).
func HeldSpend(sink map[string]any) Spend {
	total, by := splitCost(sink["cost"])
	sp := Spend{ByPhase: by}
	if t, ok := total[""]; ok {
		sp.TotalUSD = &t
	}
	return sp
}

// sameLog compares a sink's log with ours by length and last entry first:
// that settles almost every comparison without encoding the brief.
func sameLog(sink any, log []LogEntry) bool {
	entries, ok := sink.([]any)
	if !ok {
		return sink == nil && len(log) == 0
	}
	if len(entries) != len(log) {
		return false
	}
	for i := len(log) - 1; i >= 0; i-- {
		e, ok := entries[i].(map[string]any)
		if !ok {
			return false
		}
		want := log[i]
		if e["time"] != want.Time || e["agent"] != want.Agent || e["action"] != want.Action || e["detail"] != want.Detail {
			return false
		}
	}
	return true
}

// withoutNulls drops null values from objects, recursively.
func withoutNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[k] = withoutNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutNulls(e)
		}
		return out
	}
	return v
}

// ForgetHeld prepares a new attempt's skeleton to replace a brief the sink
// already holds (decoded JSON, nil for none): one an earlier workflow of
// the task left, on this host or another, or karvi's own. A sink merges a
// PATCH into what it holds and cannot delete a key, so unless the held
// brief is empty the skeleton must reset every field the reducer writes
// and null the held phases this plan lacks (ForgetPrevious). An empty or
// absent brief keeps the plain skeleton.
func (s *BriefState) ForgetHeld(held map[string]any) {
	if !holdsAnything(held) {
		return
	}
	var prev BriefState
	if phases, ok := held["phases"].(map[string]any); ok {
		for id, p := range phases {
			if p != nil {
				prev.PhaseOrder = append(prev.PhaseOrder, id)
			}
		}
	}
	if cost, ok := held["cost"].(map[string]any); ok {
		if by, ok := cost["by_phase"].(map[string]any); ok {
			for id, v := range by {
				if v != nil && !slices.Contains(prev.PhaseOrder, id) {
					prev.PhaseOrder = append(prev.PhaseOrder, id)
				}
			}
		}
	}
	slices.Sort(prev.PhaseOrder) // map order is random; the body is not
	s.ForgetPrevious(prev)
}

// holdsAnything reports whether a held brief carries anything the reducer
// writes, beyond a skeleton's defaults.
func holdsAnything(held map[string]any) bool {
	if held == nil {
		return false
	}
	for _, k := range []string{"phases", "currentPhase", "cost", "log", "artifacts"} {
		switch v := withoutNulls(held[k]).(type) {
		case nil:
		case map[string]any:
			if k == "cost" {
				if by, _ := v["by_phase"].(map[string]any); len(by) > 0 || v["total_usd"] != nil {
					return true
				}
				continue
			}
			if len(v) > 0 {
				return true
			}
		case []any:
			if len(v) > 0 {
				return true
			}
		default:
			return true
		}
	}
	if n, ok := held["completedPhases"].(float64); ok && n != 0 {
		return true
	}
	if plan, ok := held["plan"].(map[string]any); ok && plan["budget_usd"] != nil {
		return true
	}
	return false
}

// AheadOf reads a brief a sink holds (decoded JSON) as a later state of
// ours: the same plan, and a log that goes on past our last entry. It is
// how an attempt whose host was lost learns what its delivery there sent
// after the workflow's last checkpoint, so the patch that settles the
// attempt keeps it instead of taking the sink's brief back. ok is false
// when the sink holds ours, something older, or something else.
func AheadOf(held map[string]any, ours *BriefState) (Brief, bool) {
	if held == nil {
		return Brief{}, false
	}
	data, err := json.Marshal(held)
	if err != nil {
		return Brief{}, false
	}
	var b Brief
	if err := json.Unmarshal(data, &b); err != nil || b.Plan.Name != ours.Brief.Plan.Name {
		return Brief{}, false
	}
	limit := ours.LogLimit
	if limit <= 0 {
		limit = DefaultLogLimit
	}
	log := ours.Brief.Log
	// The sink's log is the tail of ours followed by k >= 1 entries ours
	// lacks; only a full log may have dropped some of ours.
	for k := 1; k <= len(b.Log); k++ {
		m := len(b.Log) - k
		if m > len(log) || m < len(log) && len(b.Log) < limit {
			continue
		}
		if slices.Equal(b.Log[:m], log[len(log)-m:]) {
			b.Meta = ours.Brief.Meta
			if b.Phases == nil {
				b.Phases = map[string]BriefPhase{}
			}
			if b.Cost.ByPhase == nil {
				b.Cost.ByPhase = map[string]float64{}
			}
			if b.Artifacts == nil {
				b.Artifacts = []string{}
			}
			return b, true
		}
	}
	return Brief{}, false
}
