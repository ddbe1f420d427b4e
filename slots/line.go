package slots

import (
	"cmp"
	"slices"
)

// A fair line (Pool.Fair) serves its parties in turn: each run is a party,
// and the tasks outside any run are one more. The slot freed goes to the
// longest waiter of the party served least recently; a party never served
// (or not since it last had nobody waiting or holding) comes first, and
// parties tied that way go in the order their first waiter arrived. So the
// parties take turns while they wait, and a small run that arrives behind a
// big one gets the next slot freed, not the one after the big run's last
// task.

// Line is the waiters in the order they will be served if nobody else
// arrives: in order of arrival, or in a fair line by turns.
func (p *Pool) Line() []Waiter {
	if !p.Fair {
		return p.Waiters
	}
	queues := map[string][]Waiter{}
	var parties []string
	for _, w := range p.Waiters {
		if _, seen := queues[w.Run]; !seen {
			parties = append(parties, w.Run)
		}
		queues[w.Run] = append(queues[w.Run], w)
	}
	// Served least recently first (ties: first waiter first, which is the
	// order parties holds); each party served goes to the back of the
	// turn, so from here on the turns go round in this order.
	slices.SortStableFunc(parties, func(a, b string) int { return cmp.Compare(p.Served[a], p.Served[b]) })
	out := make([]Waiter, 0, len(p.Waiters))
	for len(parties) > 0 {
		kept := parties[:0]
		for _, party := range parties {
			q := queues[party]
			out = append(out, q[0])
			if queues[party] = q[1:]; len(q) > 1 {
				kept = append(kept, party)
			}
		}
		parties = kept
	}
	return out
}

// next is the index in Waiters of the waiter served next.
func (p *Pool) next() int {
	if !p.Fair {
		return 0
	}
	best := 0
	for i, w := range p.Waiters {
		if p.Served[w.Run] < p.Served[p.Waiters[best].Run] {
			best = i
		}
	}
	return best
}

// served records a slot granted to party, and forgets the parties that no
// longer wait or hold: one that comes back later is new to the line.
func (p *Pool) served(party string) {
	if !p.Fair {
		return
	}
	if p.Served == nil {
		p.Served = map[string]uint64{}
	}
	p.Turns++
	p.Served[party] = p.Turns
	// Rebuilt from the lists (not by ranging over the map), so a workflow
	// keeping the pool sees no map iteration.
	kept := make(map[string]uint64, len(p.Served))
	keep := func(k string) {
		if v, ok := p.Served[k]; ok {
			kept[k] = v
		}
	}
	keep(party)
	for _, w := range p.Waiters {
		keep(w.Run)
	}
	for _, h := range p.Holders {
		keep(h.Run)
	}
	p.Served = kept
}
