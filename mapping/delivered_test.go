package mapping

import (
	"encoding/json"
	"testing"

	"karvi-edda-temporal/internal/jsonmerge"
)

// The sink's brief is the merge of every delivered patch; SinkHolds must
// recognise exactly the state after the last delivered event, and none
// before or after it, whatever karvi adds (meta.updatedAt, nulls of a
// reset, fields of its own).
func TestSinkHoldsFindsTheLastDeliveredEvent(t *testing.T) {
	lines := []string{
		`{"type":"plan_start","plan_name":"karvi-t5","phase_count":3}`,
		`{"type":"phase_start","phase_id":"implement","attempt":1,"ts":"t1"}`,
		`{"type":"tick","ts":"t1"}`,
		`{"type":"tick","ts":"t1"}`,
		`{"type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":1000,"cost_usd":0.5,"ts":"t2"}`,
		`{"type":"phase_failed","phase_id":"test","attempt":1,"error":"check failed: x","ts":"t3"}`,
		`{"type":"plan_completed","phases_passed":3,"ts":"t4"}`,
	}
	for _, redispatch := range []bool{false, true} {
		s := threePhaseState()
		s.ResetPrevious = redispatch
		var enc BriefEncoder
		sink := map[string]any{"meta": map[string]any{"updatedAt": "x"}, "karviOwn": true}
		merge := func(body json.RawMessage) {
			var patch map[string]any
			if err := json.Unmarshal(body, &patch); err != nil {
				t.Fatal(err)
			}
			sink = jsonmerge.Merge(sink, patch)
		}
		merge(enc.Init(&s).Body)
		states := []Brief{copyBrief(t, s.Brief)}
		for i, l := range lines {
			c, ok := s.Reduce(at(int64(i+1), l))
			if !ok {
				t.Fatalf("line %d reduced to nothing", i)
			}
			merge(enc.Patch(&s, c).Body)
			states = append(states, copyBrief(t, s.Brief))
			for j := range states {
				if got, want := SinkHolds(sink, &states[j]), j == len(states)-1; got != want {
					t.Fatalf("redispatch=%v after event %d: SinkHolds(state %d) = %v, want %v", redispatch, i, j, got, want)
				}
			}
		}
	}
	if SinkHolds(nil, &Brief{}) {
		t.Error("an absent brief holds nothing")
	}
}

func copyBrief(t *testing.T, b Brief) Brief {
	t.Helper()
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var out Brief
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A spend patch raises costs with no log entry: the sink's brief then
// still holds the state it had, with costs at or above ours; costs below
// ours, or any other field changed, are not ours.
func TestSinkHoldsAcceptsCostsRaisedBySpend(t *testing.T) {
	s := threePhaseState()
	var enc BriefEncoder
	sink := map[string]any{}
	merge := func(body json.RawMessage) {
		var patch map[string]any
		if err := json.Unmarshal(body, &patch); err != nil {
			t.Fatal(err)
		}
		sink = jsonmerge.Merge(sink, patch)
	}
	merge(enc.Init(&s).Body)
	for i, l := range []string{
		`{"type":"phase_start","phase_id":"implement","attempt":1,"ts":"t1"}`,
		`{"type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":1000,"cost_usd":0.5,"ts":"t2"}`,
	} {
		c, _ := s.Reduce(at(int64(i+1), l))
		merge(enc.Patch(&s, c).Body)
	}
	before := copyBrief(t, s.Brief)
	raised := s.Clone()
	total := 3.0
	c, changed := raised.ApplySpend(Spend{TotalUSD: &total, ByPhase: map[string]float64{"implement": 0.75}})
	if !changed {
		t.Fatal("spend changed nothing")
	}
	merge(enc.Patch(&raised, c).Body)
	if !SinkHolds(sink, &before) {
		t.Fatal("costs raised by spend: still the state before it")
	}
	if !SinkHolds(sink, &raised.Brief) {
		t.Fatal("the raised state itself")
	}
	sp := HeldSpend(sink)
	if sp.TotalUSD == nil || *sp.TotalUSD != 3 || sp.ByPhase["implement"] != 0.75 {
		t.Fatalf("HeldSpend = %+v", sp)
	}
	higher := raised.Clone()
	more := 4.0
	higher.ApplySpend(Spend{TotalUSD: &more})
	if SinkHolds(sink, &higher.Brief) {
		t.Error("the sink's total is below ours: not ours")
	}
	other := copyBrief(t, before)
	other.CompletedPhases++
	if SinkHolds(sink, &other) {
		t.Error("another completedPhases: not ours")
	}
}
