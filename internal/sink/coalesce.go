package sink

import (
	"encoding/json"
	"fmt"

	"karvi-edda-temporal/internal/jsonmerge"
)

// Coalescer merges brief patches that would wait for their turn (karvi's
// rate limit is used up) into one PATCH. The brief is a state and every
// patch carries the whole log, so the merge of patches p1..pn, applied to
// the brief, leaves it as p1..pn applied one after the other would: karvi's
// PATCH is a deep merge where objects merge and everything else replaces,
// and that merge is associative. The brief then jumps from the state before
// p1 to the state after pn, a state a resumed delivery still recognises
// (mapping.SinkHolds), so the order and exactly-once guarantees hold: no
// state goes backwards, no log entry arrives twice.
//
// The zero value is ready. While it holds nothing and the sink is not
// congested, Hold refuses and the caller sends at once: the latency of an
// event's PATCH is unchanged when karvi is not pushing back.
type Coalescer struct {
	body map[string]any
	n    int
}

// Hold keeps body for a later merged PATCH, and reports whether it did: when
// something is held already (a later patch must not overtake it) or the
// sink says its writes now wait.
func (c *Coalescer) Hold(s Sink, body json.RawMessage) (bool, error) {
	if c.n == 0 && !Congested(s) {
		return false, nil
	}
	doc, err := jsonmerge.DecodeObject(body)
	if err != nil {
		return false, fmt.Errorf("coalesce brief patch: %w", err)
	}
	if c.n == 0 {
		c.body = doc
	} else {
		c.body = jsonmerge.Merge(c.body, doc)
	}
	c.n++
	return true, nil
}

// Take returns the merged body and how many patches it stands for, and
// empties the Coalescer; n is 0 when nothing is held.
func (c *Coalescer) Take() (body json.RawMessage, n int, err error) {
	if c.n == 0 {
		return nil, 0, nil
	}
	b, err := json.Marshal(c.body)
	n = c.n
	c.body, c.n = nil, 0
	if err != nil {
		return nil, 0, fmt.Errorf("coalesce brief patch: %w", err)
	}
	return b, n, nil
}

// Held is how many patches wait in the Coalescer.
func (c *Coalescer) Held() int { return c.n }
