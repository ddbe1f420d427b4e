package observe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"karvi-edda-temporal/soak"
)

// Journal appends soak.Records to a JSONL file. Each record is one write
// of one line, flushed at once, so a driver that dies leaves every record
// it made. Safe for concurrent use.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	now  func() time.Time
}

// OpenJournal opens (creating or appending to) the journal at path.
func OpenJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open soak journal: %w", err)
	}
	return &Journal{f: f, path: path, now: time.Now}, nil
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }

// Append writes one record; a zero At is stamped with the current time.
func (j *Journal) Append(r soak.Record) error {
	if r.At.IsZero() {
		r.At = j.now()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode journal record %s: %w", r.Kind, err)
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return fmt.Errorf("soak journal %s: closed", j.path)
	}
	if _, err := j.f.Write(line); err != nil {
		return fmt.Errorf("append to soak journal %s: %w", j.path, err)
	}
	return nil
}

// Close closes the journal's file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// ReadJournal reads a journal back, in file order. A missing file is an
// empty journal; a torn last line (the driver killed mid-write) is
// skipped, a malformed line elsewhere is an error naming it.
func ReadJournal(path string) ([]soak.Record, error) {
	var out []soak.Record
	err := readJSONL(path, func(n int, line []byte, last bool) error {
		var r soak.Record
		if err := json.Unmarshal(line, &r); err != nil {
			if last {
				return nil
			}
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// readJSONL calls fn with each non-empty line of a JSONL file (1-based
// line numbers); last is true for the file's final line when it has no
// trailing newline, which is where a writer killed mid-line leaves its
// torn record.
func readJSONL(path string, fn func(n int, line []byte, last bool) error) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	lines := bytes.Split(data, []byte{'\n'})
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := fn(i+1, line, i == len(lines)-1); err != nil {
			return err
		}
	}
	return nil
}
