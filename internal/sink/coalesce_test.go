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
	body, n, err := c.Take()
	if err != nil || n != 3 {
		t.Fatalf("take: n=%d err=%v", n, err)
	}
	merged := jsonmerge.Merge(mustDecode(t, base), mustDecode(t, string(body)))
	if !reflect.DeepEqual(one, merged) {
		t.Fatalf("merged patch leaves\n%v\none by one\n%v", merged, one)
	}
	if _, n, _ := c.Take(); n != 0 || c.Held() != 0 {
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
