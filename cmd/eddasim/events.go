package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Event bodies: the fields after seq, ts and type, in edda's order.

type evPlanStart struct {
	PlanName   string `json:"plan_name"`
	PhaseCount int    `json:"phase_count"`
}

type evPhaseStart struct {
	PhaseID string `json:"phase_id"`
	Attempt int    `json:"attempt"`
}

type evPhasePassed struct {
	PhaseID    string   `json:"phase_id"`
	Attempt    int      `json:"attempt"`
	DurationMS int64    `json:"duration_ms"`
	CostUSD    *float64 `json:"cost_usd"`
}

type evPhaseFailed struct {
	PhaseID    string `json:"phase_id"`
	Attempt    int    `json:"attempt"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error"`
	ErrorType  string `json:"error_type"`
}

type evPhaseSkipped struct {
	PhaseID string `json:"phase_id"`
	Reason  string `json:"reason"`
}

type evPlanCompleted struct {
	PhasesPassed int      `json:"phases_passed"`
	TotalCostUSD *float64 `json:"total_cost_usd"`
}

type evPlanAborted struct {
	PhasesPassed  int `json:"phases_passed"`
	PhasesPending int `json:"phases_pending"`
}

// evAgentProgress is not an edda type: it exists so consumers can prove
// they tolerate unknown event types, and to make long logs cheaply.
type evAgentProgress struct {
	PhaseID string `json:"phase_id"`
	N       int    `json:"n"`
}

// eventLog appends events to events.jsonl. seq starts at 0 in every
// process, as edda's does, so a resumed run repeats sequence numbers.
type eventLog struct {
	path   string
	seq    int
	stdout io.Writer // nil unless --json
}

func newEventLog(cwd, plan string, stdout io.Writer) *eventLog {
	return &eventLog{path: filepath.Join(stateDir(cwd, plan), "events.jsonl"), stdout: stdout}
}

// record writes one line with a single write call on an O_APPEND file, so
// a concurrent tailer sees whole lines (or a partial last one mid-write).
// Failures are reported and otherwise ignored: edda's writes are best effort.
func (l *eventLog) record(typ string, body any) {
	line, err := encodeEvent(l.seq, time.Now(), typ, body)
	l.seq++
	if err != nil {
		fmt.Fprintf(os.Stderr, "eddasim: event %s not encoded: %v\n", typ, err)
		return
	}
	if err := appendLine(l.path, line); err != nil {
		fmt.Fprintf(os.Stderr, "eddasim: event %s not written: %v\n", typ, err)
	}
	if l.stdout != nil {
		_, _ = l.stdout.Write(line)
	}
}

// encodeEvent renders {"seq":N,"ts":"...","type":"...",<body fields>}\n.
func encodeEvent(seq int, ts time.Time, typ string, body any) ([]byte, error) {
	head, err := json.Marshal(struct {
		Seq  int    `json:"seq"`
		TS   string `json:"ts"`
		Type string `json:"type"`
	}{seq, ts.UTC().Format(time.RFC3339Nano), typ})
	if err != nil {
		return nil, fmt.Errorf("encoding event header: %w", err)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding %s body: %w", typ, err)
	}
	var buf bytes.Buffer
	buf.Write(head[:len(head)-1])
	if inner := bytes.TrimSpace(b[1 : len(b)-1]); len(inner) > 0 {
		buf.WriteByte(',')
		buf.Write(inner)
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

func appendLine(path string, line []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	_, werr := f.Write(line)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("appending to %s: %w", path, werr)
	}
	if cerr != nil {
		return fmt.Errorf("closing %s: %w", path, cerr)
	}
	return nil
}
