package canonical

import "encoding/json"

// Follow returns the events to store for ev so that the stream keeps to the
// transition table, given the agent's last state as this Stream knows it
// (call Validate on each returned event, in order, to move it on):
//
//   - a change the table does not list is preceded by the states it
//     implies, each a state_change of its own (trigger "implied"): a phase
//     that fails for good goes running, error, failed; an agent id reused
//     after done goes done, idle, running; a waiting agent that ends
//     passes through running. The path is the shortest the table allows.
//     A bridge has no raw_ref: it stands for no source line, and a store
//     that dedups by raw_ref never takes it for the event it precedes;
//   - a state_change that repeats the agent's state is no change: it is
//     kept as a task_update, payload and all.
//
// An agent's first event, an event that does not validate and a change out
// of a terminal state (which no path leaves) come back alone, unchanged.
// Follow does not change the Stream.
func (s *Stream) Follow(ev Event) []Event {
	prev, seen := s.last[agentKey{ev.RunID, ev.AgentID}]
	if !seen || !ev.State.Valid() {
		return []Event{ev}
	}
	if prev == ev.State {
		if ev.Type == TypeStateChange {
			ev.Type = TypeTaskUpdate
		}
		return []Event{ev}
	}
	if Transition(prev, ev.State) {
		return []Event{ev}
	}
	path := pathBetween(prev, ev.State)
	if path == nil {
		return []Event{ev}
	}
	out := make([]Event, 0, len(path)+1)
	from := prev
	for _, st := range path[:len(path)-1] {
		out = append(out, bridge(ev, from, st))
		from = st
	}
	return append(out, ev)
}

// bridge is the implied change from one state to the next, for ev's agent.
func bridge(ev Event, from, to State) Event {
	b := Event{TS: ev.TS, RunID: ev.RunID, Provider: ev.Provider, Mode: ev.Mode, AgentID: ev.AgentID,
		ParentAgentID: ev.ParentAgentID, Role: ev.Role, State: to, Type: TypeStateChange,
		TaskID: ev.TaskID, IntentRef: ev.IntentRef}
	b.Payload, _ = json.Marshal(implied{From: from, To: to, Trigger: "implied", Before: ev.Type})
	return b
}

type implied struct {
	From    State  `json:"from"`
	To      State  `json:"to"`
	Trigger string `json:"trigger"`
	// Before names the type of the event the change comes before.
	Before Type `json:"before"`
}

// pathBetween is the shortest chain of states after from that ends in to,
// every step allowed by the table (breadth first, in the table's order, so
// the same for every call); nil when there is none.
func pathBetween(from, to State) []State {
	prev := map[State]State{from: from}
	queue := []State{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, next := range transitions[cur] {
			if _, ok := prev[next]; ok {
				continue
			}
			prev[next] = cur
			if next == to {
				var path []State
				for st := to; st != from; st = prev[st] {
					path = append([]State{st}, path...)
				}
				return path
			}
			queue = append(queue, next)
		}
	}
	return nil
}
