package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/soak"
	"karvi-edda-temporal/testkit/karvifake"
)

// Board is where tasks' statuses and briefs are read at the end: the karvi
// fake, or the file sink's directory.
type Board interface {
	// Task returns the task's board entry and brief; nil for what the
	// board does not have.
	Task(id string) (*soak.BoardTask, *soak.Brief, error)
}

// FakeBoard reads the in-process karvi fake.
func FakeBoard(s *karvifake.Server) Board { return fakeBoard{s} }

type fakeBoard struct{ s *karvifake.Server }

func (b fakeBoard) Task(id string) (*soak.BoardTask, *soak.Brief, error) {
	t, ok := b.s.Task(id)
	if !ok {
		return nil, nil, nil
	}
	bt := &soak.BoardTask{Status: t.Status}
	if t.Blocker != nil {
		bt.Blocker = t.Blocker.Reason
	}
	for _, raw := range t.History {
		var h struct {
			TS     string          `json:"ts"`
			Status string          `json:"status"`
			Update json.RawMessage `json:"update"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, nil, fmt.Errorf("karvi task %s history: %w", id, err)
		}
		// karvi records every /update with the status the task has: one
		// that left the status as it was (a result written after the
		// final status) is no status change.
		if n := len(bt.History); h.Update != nil && n > 0 && bt.History[n-1].Status == h.Status {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, h.TS)
		bt.History = append(bt.History, soak.StatusChange{At: at, Status: h.Status})
	}
	br, err := BriefOf(b.s.Brief(id))
	if err != nil {
		return nil, nil, fmt.Errorf("karvi task %s: %w", id, err)
	}
	return bt, br, nil
}

// FileBoard reads the file sink's directory: <dir>/<task>/brief.json and
// status.json.
func FileBoard(dir string) Board { return fileBoard(dir) }

type fileBoard string

func (d fileBoard) Task(id string) (*soak.BoardTask, *soak.Brief, error) {
	tdir := filepath.Join(string(d), id)
	var bt *soak.BoardTask
	data, err := os.ReadFile(filepath.Join(tdir, sink.StatusFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, nil, fmt.Errorf("read task %s status: %w", id, err)
	default:
		var st sink.TaskStatus
		if err := json.Unmarshal(data, &st); err != nil {
			return nil, nil, fmt.Errorf("task %s %s: %w", id, sink.StatusFile, err)
		}
		bt = &soak.BoardTask{Status: st.Status}
		if st.Blocker != nil {
			bt.Blocker = st.Blocker.Reason
		}
		for _, h := range st.History {
			at, _ := time.Parse(time.RFC3339Nano, h.At)
			bt.History = append(bt.History, soak.StatusChange{At: at, Status: h.Status})
		}
	}
	data, err = os.ReadFile(filepath.Join(tdir, sink.BriefFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("read task %s brief: %w", id, err)
	}
	br, err := ParseBrief(data)
	if err != nil {
		return nil, nil, fmt.Errorf("task %s: %w", id, err)
	}
	return bt, br, nil
}
