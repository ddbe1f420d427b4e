package tracing

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"karvi-edda-temporal/traces"
)

// Emitter exports spans once each: it keeps a ledger, one file per owner
// (a task's stream), of the span ids the collector acknowledged, and
// exports only those not in it. The ledger lives beside the task's event
// stream, which every worker of a fleet shares, since a task's spans come
// from activities on any of them.
//
// An activity retried after its worker died makes the same spans again
// (every id is derived from what they describe); the ledger drops those
// already acknowledged. What it cannot know is an export the collector
// took while the worker died before the ledger's line was written: that
// span is sent again, with the same ids (docs/traces.md).
type Emitter struct {
	t   *Tracing
	dir string
	mu  sync.Mutex
}

// NewEmitter emits through t, keeping its ledgers in dir; nil when t is
// nil (off).
func NewEmitter(t *Tracing, dir string) *Emitter {
	if t == nil {
		return nil
	}
	return &Emitter{t: t, dir: dir}
}

// Tracing is the emitter's tracing, nil for a nil emitter.
func (e *Emitter) Tracing() *Tracing {
	if e == nil {
		return nil
	}
	return e.t
}

// Emit seals spans (their texts redacted), exports those the ledger of
// owner does not hold, and records them there once the collector took
// them. It returns how many it exported.
func (e *Emitter) Emit(ctx context.Context, owner string, spans []traces.Span) (int, error) {
	if e == nil || len(spans) == 0 {
		return 0, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	path, err := e.ledger(owner)
	if err != nil {
		return 0, err
	}
	done, err := readLedger(path)
	if err != nil {
		return 0, err
	}
	var todo []traces.Span
	seen := map[string]bool{}
	for _, s := range spans {
		k := s.SpanID.String()
		if done[k] || seen[k] {
			continue
		}
		seen[k] = true
		todo = append(todo, s)
	}
	if len(todo) == 0 {
		return 0, nil
	}
	if err := e.t.Export(ctx, traces.Seal(todo)); err != nil {
		return 0, err
	}
	var b bytes.Buffer
	for _, s := range todo {
		b.WriteString(s.SpanID.String())
		b.WriteByte('\n')
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return len(todo), fmt.Errorf("tracing: ledger %s: %w", path, err)
	}
	// One write: a reader never sees half an id, and O_APPEND keeps two
	// writers' lines whole.
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return len(todo), fmt.Errorf("tracing: ledger %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return len(todo), fmt.Errorf("tracing: ledger %s: %w", path, err)
	}
	return len(todo), f.Close()
}

func (e *Emitter) ledger(owner string) (string, error) {
	if owner == "" || strings.ContainsAny(owner, `/\`) || owner == "." || owner == ".." {
		return "", fmt.Errorf("tracing: %q is no ledger name", owner)
	}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return "", fmt.Errorf("tracing: ledger directory: %w", err)
	}
	return filepath.Join(e.dir, owner+".spans"), nil
}

func readLedger(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: ledger %s: %w", path, err)
	}
	defer f.Close()
	done := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); len(l) == 16 {
			done[l] = true // a torn last line is no id, and is sent again
		}
	}
	return done, sc.Err()
}
