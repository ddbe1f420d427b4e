package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/karvifake"
)

// EventStamp is one conductor event and the moment it was written.
type EventStamp struct {
	TS   string    // the ts field as written
	Type string    // normalised, as the brief's log records it
	At   time.Time // TS parsed
}

// key is how a brief log entry names its event.
func (e EventStamp) key() string { return e.TS + "\x00" + e.Type }

// ReadEvents reads an events.jsonl file. Lines without a parseable
// RFC3339 ts are errors: latency cannot be measured without it.
func ReadEvents(path string) ([]EventStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	var out []EventStamp
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<24)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		ev, err := mapping.ParseEvent(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		at, err := time.Parse(time.RFC3339Nano, ev.TS)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: ts %q: %w", path, n, ev.TS, err)
		}
		out = append(out, EventStamp{TS: ev.TS, Type: ev.Type, At: at})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// Sample is the event-to-PATCH latency of one event.
type Sample struct {
	TS      string
	Type    string
	At      time.Time // when the event was written
	Latency time.Duration
}

// MatchResult pairs a task's events with the PATCHes that carried them.
type MatchResult struct {
	Samples []Sample
	// Missing counts events that warrant a PATCH but got none; Unmatched
	// counts brief PATCHes (other than the skeleton) naming no event.
	Missing, Unmatched int
	// Last is the receipt time of the last matched PATCH.
	Last time.Time
}

// Match pairs PATCH /api/brief writes with events by the log entry each
// body appends: the last entry of its log has the event's ts and type. A
// PATCH sent twice (a retried batch) counts from its first receipt.
func Match(events []EventStamp, writes []karvifake.Write) MatchResult {
	byKey := make(map[string]int, len(events))
	for i, e := range events {
		if _, dup := byKey[e.key()]; !dup {
			byKey[e.key()] = i
		}
	}
	matched := make([]bool, len(events))
	var res MatchResult
	for _, w := range writes {
		if w.Method != "PATCH" || !strings.HasPrefix(w.Path, "/api/brief/") {
			continue
		}
		last, ok := lastLogEntry(w.Body)
		if !ok {
			continue // the skeleton: its log is empty
		}
		i, ok := byKey[last.Time+"\x00"+last.Action]
		if !ok {
			res.Unmatched++
			continue
		}
		if matched[i] {
			continue
		}
		matched[i] = true
		res.Samples = append(res.Samples, Sample{TS: events[i].TS, Type: events[i].Type, At: events[i].At, Latency: w.At.Sub(events[i].At)})
		if w.At.After(res.Last) {
			res.Last = w.At
		}
	}
	for i, e := range events {
		if !matched[i] && e.Type != mapping.EventPlanAborted {
			res.Missing++
		}
	}
	return res
}

// lastLogEntry finds the last entry of a patch body's log. The reducer
// writes log last, so the last `{"time":` starts it (a quote inside a JSON
// string is always escaped, so the text cannot occur inside one); a body of
// another shape is decoded whole.
func lastLogEntry(body []byte) (mapping.LogEntry, bool) {
	if i := bytes.LastIndex(body, []byte(`{"time":`)); i >= 0 {
		var e mapping.LogEntry
		if err := json.NewDecoder(bytes.NewReader(body[i:])).Decode(&e); err == nil {
			return e, true
		}
	}
	var b struct {
		Log []mapping.LogEntry `json:"log"`
	}
	if err := json.Unmarshal(body, &b); err != nil || len(b.Log) == 0 {
		return mapping.LogEntry{}, false
	}
	return b.Log[len(b.Log)-1], true
}
