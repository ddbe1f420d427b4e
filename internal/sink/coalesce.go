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
// Patches stay held across batches of events for as long as the sink is
// congested: the caller sends what is held once it is not, and always
// before it reports a checkpoint (a checkpoint claims only what the sink
// acknowledged).
//
// The first body held may be a whole brief (HoldWhole: an attempt's
// skeleton, which replaces what the sink held): the merged body is then a
// whole brief too, to be sent as one replacement (karvi's PUT), and it
// leaves the brief as the skeleton's replacement and the patches after it
// one by one would.
//
// The zero value is ready. While it holds nothing and the sink is not
// congested, Hold refuses and the caller sends at once: the latency of an
// event's PATCH is unchanged when karvi is not pushing back.
type Coalescer struct {
	body  map[string]any
	n     int
	whole bool
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

// HoldWhole keeps body, a task's whole brief, as the start of a later
// merged write that replaces the brief (Take's whole). Only an empty
// Coalescer takes one: a replacement must not overtake a patch held
// before it.
func (c *Coalescer) HoldWhole(body json.RawMessage) error {
	if c.n != 0 {
		return fmt.Errorf("coalesce brief: a whole brief after %d held patches", c.n)
	}
	doc, err := jsonmerge.DecodeObject(body)
	if err != nil {
		return fmt.Errorf("coalesce brief: %w", err)
	}
	c.body, c.n, c.whole = doc, 1, true
	return nil
}

// Take returns the merged body, how many patches it stands for and whether
// it is a whole brief (it began with HoldWhole), and empties the
// Coalescer; n is 0 when nothing is held.
func (c *Coalescer) Take() (body json.RawMessage, n int, whole bool, err error) {
	if c.n == 0 {
		return nil, 0, false, nil
	}
	b, err := json.Marshal(c.body)
	n, whole = c.n, c.whole
	c.body, c.n, c.whole = nil, 0, false
	if err != nil {
		return nil, 0, false, fmt.Errorf("coalesce brief patch: %w", err)
	}
	return b, n, whole, nil
}

// Held is how many patches wait in the Coalescer.
func (c *Coalescer) Held() int { return c.n }
