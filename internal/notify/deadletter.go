package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// DeadLetter is one line of the dead-letter file.
type DeadLetter struct {
	// At is when the event was given up on.
	At time.Time `json:"dead_at"`
	// Reason says why: the last failure, "queue full", "notifier closed".
	Reason string `json:"reason"`
	// Attempts counts the deliveries tried (0: never sent).
	Attempts int `json:"attempts"`
	// Delivery is the event's delivery id, as sent in the header.
	Delivery string `json:"delivery"`
	// Event is the body that was, or would have been, sent: redacted, byte
	// for byte what the signature covers.
	Event json.RawMessage `json:"event"`
}

type deadLetter struct {
	it       item
	attempts int
	reason   string
}

// toDead hands an event to the dead-letter goroutine (the sender may wait).
func (n *Notifier) toDead(it item, attempts int, reason string) {
	n.dead <- deadLetter{it: it, attempts: attempts, reason: reason}
}

// spill dead-letters an event on the caller's goroutine path: through the
// dead-letter goroutine if it has room, else (the notifier is closed, or
// both queues are full) by writing the file here: never dropped.
func (n *Notifier) spill(it item, reason string) {
	n.spilled.Add(1)
	if !n.closed {
		select {
		case n.dead <- deadLetter{it: it, reason: reason}:
			return
		default:
		}
	}
	n.writeDead(deadLetter{it: it, reason: reason})
}

func (n *Notifier) deadLoop() {
	defer close(n.deadDone)
	for d := range n.dead {
		n.writeDead(d)
	}
}

// writeDead appends one line with a single write to a file opened for
// appending, then fsyncs it: readers see whole lines, and a crash loses at
// most the line being written.
func (n *Notifier) writeDead(d deadLetter) {
	// No HTML escaping: the event stays byte for byte the signed body.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(DeadLetter{At: time.Now().UTC(), Reason: d.reason, Attempts: d.attempts, Delivery: d.it.id, Event: d.it.body})
	if err == nil {
		err = n.appendLine(buf.Bytes())
	}
	if err != nil {
		n.lost.Add(1)
		err = fmt.Errorf("notify: event %s (%s) lost: dead-letter file %s: %w", d.it.id, d.it.kind, n.cfg.DeadLetter, err)
		n.deadErr.CompareAndSwap(nil, &err)
		n.cfg.Logger.Error("notification lost", "delivery", d.it.id, "kind", d.it.kind, "reason", d.reason, "error", err)
		return
	}
	n.deadLettered.Add(1)
	n.cfg.Logger.Warn("notification dead-lettered", "delivery", d.it.id, "kind", d.it.kind, "reason", d.reason,
		"attempts", d.attempts, "file", n.cfg.DeadLetter)
}

func (n *Notifier) appendLine(line []byte) error {
	n.fileMu.Lock()
	defer n.fileMu.Unlock()
	f, err := os.OpenFile(n.cfg.DeadLetter, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadDeadLetters reads a dead-letter file, for an operator's tool that
// re-sends or reports them. A torn last line (a crash mid-write) is skipped;
// any other bad line is an error naming its line number.
func ReadDeadLetters(data []byte) ([]DeadLetter, error) {
	var out []DeadLetter
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		i := indexNL(data)
		line := data
		if i < 0 {
			data = nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		if len(line) == 0 {
			continue
		}
		var d DeadLetter
		if err := json.Unmarshal(line, &d); err != nil {
			if i < 0 {
				break // a torn last line
			}
			return out, fmt.Errorf("notify: dead-letter line %d: %w", lineNo, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}
