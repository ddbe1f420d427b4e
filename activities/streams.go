package activities

import (
	"context"
	"path/filepath"
	"sync"

	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/eventstream"
)

// DefaultEventsDir is where streams go when the worker is not told:
// <work root>/events.
func DefaultEventsDir(workRoot string) string { return filepath.Join(workRoot, "events") }

// StreamCounts says what an activity did to the stream: events appended,
// skipped (already stored), dropped (invalid), and warnings (a degraded
// value, a state change the table does not allow, a phase without a known
// role); each warning and drop is also in the worker's log.
type StreamCounts struct {
	Appended int `json:"appended,omitempty"`
	Skipped  int `json:"skipped,omitempty"`
	Dropped  int `json:"dropped,omitempty"`
	Warnings int `json:"warnings,omitempty"`
}

func (c *StreamCounts) Add(o StreamCounts) {
	c.Appended += o.Appended
	c.Skipped += o.Skipped
	c.Dropped += o.Dropped
	c.Warnings += o.Warnings
}

// Streams is the worker's store of canonical event streams, opened once on first use.
type Streams struct {
	once  sync.Once
	store *eventstream.Store
	err   error
}

// Open opens the store of cfg's events directory, once.
func (s *Streams) Open(cfg Config) (*eventstream.Store, error) {
	s.once.Do(func() {
		dir := cfg.EventsDir
		if dir == "" {
			dir = DefaultEventsDir(cfg.WorkRoot)
		}
		s.store, s.err = eventstream.Open(dir)
	})
	return s.store, s.err
}

// AppendTo stores events in the stream runID of st and reports what
// happened to them.
func AppendTo(ctx context.Context, st *eventstream.Store, runID string, evs []canonical.Event) (StreamCounts, error) {
	res, err := st.Append(runID, evs)
	if err != nil {
		return StreamCounts{}, err
	}
	for _, w := range res.Warnings {
		Logger(ctx).Warn("canonical event kept with a warning", "run", runID, "warning", w)
	}
	for _, e := range res.Errors {
		Logger(ctx).Warn("canonical event dropped", "run", runID, "error", e)
	}
	return StreamCounts{Appended: res.Appended, Skipped: res.Skipped, Dropped: res.Dropped,
		Warnings: len(res.Warnings)}, nil
}
