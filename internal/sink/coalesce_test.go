package sink

import (
	"encoding/json"
	"reflect"
	"testing"

	"karvi-edda-temporal/internal/jsonmerge"
)

type congestedSink struct {
	Sink
	busy bool
}

func (c *congestedSink) Congested() bool { return c.busy }

// Patches held while the sink is congested merge into one body that takes
// the brief where the patches one by one would; nothing is held while it is
// not, so each patch then leaves at once.
func TestCoalescerMergesWaitingPatchesIntoOne(t *testing.T) {
	base := `{"meta":{"boardType":"brief"},"controls":{"owner":"karvi"},"log":[]}`
	patches := []string{
		`{"plan":{"name":"p","status":"running"},"phases":{"a":{"status":"running"}},"log":[{"e":1}]}`,
		`{"phases":{"a":{"status":"passed","cost":0.85}},"log":[{"e":1},{"e":2}]}`,
		`{"phases":{"b":{"status":"running"}},"plan":{"current":"b"},"note":null,"log":[{"e":1},{"e":2},{"e":3}]}`,
	}
	s := &congestedSink{}
	var c Coalescer
	if held, err := c.Hold(s, json.RawMessage(patches[0])); err != nil || held {
		t.Fatalf("held %v %v while not congested", held, err)
	}
	s.busy = true
	one := mustDecode(t, base)
	for _, p := range patches {
		one = jsonmerge.Merge(one, mustDecode(t, p))
		held, err := c.Hold(s, json.RawMessage(p))
		if err != nil || !held {
			t.Fatalf("not held while congested: %v", err)
		}
		s.busy = false // once something is held, later patches join it
	}
	body, n, whole, err := c.Take()
	if err != nil || n != 3 || whole {
		t.Fatalf("take: n=%d err=%v", n, err)
	}
	merged := jsonmerge.Merge(mustDecode(t, base), mustDecode(t, string(body)))
	if !reflect.DeepEqual(one, merged) {
		t.Fatalf("merged patch leaves\n%v\none by one\n%v", merged, one)
	}
	if _, n, _, _ := c.Take(); n != 0 || c.Held() != 0 {
		t.Fatal("Take did not empty the coalescer")
	}
}

func mustDecode(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := jsonmerge.DecodeObject([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A whole brief held first (an attempt's skeleton) and the patches held
// after it merge into one whole brief: replacing the sink's brief with it
// leaves what replacing it with the skeleton and applying the patches one
// by one would, whatever the sink held before. A whole brief cannot
// follow a held patch.
func TestCoalescerMergesPatchesIntoAHeldWholeBrief(t *testing.T) {
	skeleton := `{"meta":{"taskId":"T1"},"phases":{"a":{"status":"pending"},"b":{"status":"pending"}},"log":[]}`
	patches := []string{
		`{"phases":{"a":{"status":"running"}},"currentPhase":"a","log":[{"e":1}]}`,
		`{"phases":{"a":{"status":"passed","cost_usd":null}},"log":[{"e":1},{"e":2}]}`,
	}
	s := &congestedSink{busy: true}
	var c Coalescer
	if err := c.HoldWhole(json.RawMessage(skeleton)); err != nil {
		t.Fatal(err)
	}
	one := mustDecode(t, skeleton)
	for _, p := range patches {
		one = jsonmerge.Merge(one, mustDecode(t, p))
		if held, err := c.Hold(s, json.RawMessage(p)); err != nil || !held {
			t.Fatalf("not held after a whole brief: %v", err)
		}
	}
	body, n, whole, err := c.Take()
	if err != nil || n != 3 || !whole {
		t.Fatalf("take: n=%d whole=%v err=%v", n, whole, err)
	}
	if got := mustDecode(t, string(body)); !reflect.DeepEqual(one, got) {
		t.Fatalf("merged brief\n%v\none by one\n%v", got, one)
	}
	if held, _ := c.Hold(s, json.RawMessage(patches[0])); !held {
		t.Fatal("not held while congested")
	}
	if err := c.HoldWhole(json.RawMessage(skeleton)); err == nil {
		t.Fatal("a whole brief was held after a patch")
	}
	if _, _, whole, _ := c.Take(); whole {
		t.Fatal("patches alone taken as a whole brief")
	}
}
