package activities

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/eventstream"
	"karvi-edda-temporal/mapping"
)

// A task's canonical event stream: every conductor event the tail reads and
// every step of the workflow, one JSONL file per task under the events
// directory (internal/eventstream). The tail appends the conductor's events
// as it reads them, after their patches and before its cursor moves, so a
// retried delivery reads them again from its checkpoint and the store skips
// what it holds. The workflow's steps travel in the request of the next
// activity the workflow runs anyway (the attempt's start, a delivery, a
// stop, the final status), which appends them before it does its own work:
// they cost no history event of their own.

// ErrBadRead is a read of a stream at an offset that is not the start of
// one of its events, or of a run id that names no stream. Retrying cannot
// help.
const ErrBadRead = "BadRead"

// DefaultEventsDir is where streams go when the worker is not told:
// <work root>/events.
func DefaultEventsDir(workRoot string) string { return filepath.Join(workRoot, "events") }

// StreamInfo names a task's stream for an activity that writes to it, and
// carries the workflow's steps that are not stored yet.
type StreamInfo struct {
	// RunID is the stream's run id (canonical.RunIDForTask), and its file
	// name.
	RunID string `json:"runId"`
	// Attempt is the task's attempt, which names the agents of its
	// conductor events (canonical.Context.Attempt).
	Attempt int `json:"attempt,omitempty"`
	// Steps are events the workflow made, appended before the activity
	// does anything else.
	Steps []canonical.Event `json:"steps,omitempty"`
}

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

func (c *StreamCounts) add(o StreamCounts) {
	c.Appended += o.Appended
	c.Skipped += o.Skipped
	c.Dropped += o.Dropped
	c.Warnings += o.Warnings
}

// streams is the worker's store, opened once on first use.
type streams struct {
	once  sync.Once
	store *eventstream.Store
	err   error
}

func (a *Activities) store() (*eventstream.Store, error) { return a.streams.open(a.Config) }

// open opens the store of cfg's events directory, once.
func (s *streams) open(cfg Config) (*eventstream.Store, error) {
	s.once.Do(func() {
		dir := cfg.EventsDir
		if dir == "" {
			dir = DefaultEventsDir(cfg.WorkRoot)
		}
		s.store, s.err = eventstream.Open(dir)
	})
	return s.store, s.err
}

// appendStream stores events in the stream runID and reports what happened
// to them. An error is retryable: the activity fails, is retried from the
// workflow's checkpoint, and sends the events again.
func (a *Activities) appendStream(ctx context.Context, runID string, evs []canonical.Event) (StreamCounts, error) {
	if len(evs) == 0 {
		return StreamCounts{}, nil
	}
	st, err := a.store()
	if err != nil {
		return StreamCounts{}, err
	}
	return appendTo(ctx, st, runID, evs)
}

// appendTo stores events in the stream runID of st and reports what
// happened to them.
func appendTo(ctx context.Context, st *eventstream.Store, runID string, evs []canonical.Event) (StreamCounts, error) {
	res, err := st.Append(runID, evs)
	if err != nil {
		return StreamCounts{}, err
	}
	for _, w := range res.Warnings {
		activityLogger(ctx).Warn("canonical event kept with a warning", "run", runID, "warning", w)
	}
	for _, e := range res.Errors {
		activityLogger(ctx).Warn("canonical event dropped", "run", runID, "error", e)
	}
	return StreamCounts{Appended: res.Appended, Skipped: res.Skipped, Dropped: res.Dropped,
		Warnings: len(res.Warnings)}, nil
}

// appendSteps stores the workflow's steps a request carries.
func (a *Activities) appendSteps(ctx context.Context, s *StreamInfo) (StreamCounts, error) {
	if s == nil {
		return StreamCounts{}, nil
	}
	return a.appendStream(ctx, s.RunID, s.Steps)
}

// appendConductor maps an attempt's conductor events and stores them.
func (a *Activities) appendConductor(ctx context.Context, s *StreamInfo, taskID string, plan PlanInfo, evs []mapping.Event) (StreamCounts, error) {
	if s == nil || len(evs) == 0 {
		return StreamCounts{}, nil
	}
	cctx := ConductorContext(taskID, plan, *s, a.phaseAttempts(plan.PlanPath))
	out := make([]canonical.Event, 0, len(evs))
	mapWarnings := 0
	for _, ev := range evs {
		c, warns := canonical.FromConductor(ev, cctx)
		for _, w := range warns {
			activityLogger(ctx).Warn("canonical event kept with a warning", "run", s.RunID, "warning", c.RawRef+": "+w.String())
		}
		mapWarnings += len(warns)
		out = append(out, c)
	}
	n, err := a.appendStream(ctx, s.RunID, out)
	n.Warnings += mapWarnings
	return n, err
}

// ConductorContext is how an attempt's conductor events are mapped: the
// task's stream, its attempt (naming the agents), the plan and its attempt
// budgets, the events file for raw_ref, and the workflow as the
// conductor's parent. perPhase holds the phases' own max_attempts.
func ConductorContext(taskID string, plan PlanInfo, s StreamInfo, perPhase map[string]int) canonical.Context {
	return canonical.Context{
		RunID:              s.RunID,
		TaskID:             taskID,
		Plan:               plan.Summary.Name,
		Parent:             canonical.WorkflowAgent,
		File:               plan.EventsPath,
		MaxAttempts:        perPhase,
		DefaultMaxAttempts: plan.Summary.MaxAttempts,
		Attempt:            s.Attempt,
	}
}

// phaseAttempts reads the phases' own attempt budgets from the plan file,
// through the cache the explainer fills; nil when the plan cannot be read.
func (a *Activities) phaseAttempts(planPath string) map[string]int {
	a.explainer(planPath) // reads and caches the plan
	cached, ok := a.plans.Load(planPath)
	if !ok {
		return nil
	}
	out := map[string]int{}
	for _, ph := range cached.(*mapping.Plan).Phases {
		if ph.MaxAttempts > 0 {
			out[ph.ID] = ph.MaxAttempts
		}
	}
	return out
}

// The tail's part: steps first, then each batch's events.

func (d *delivery) appendSteps(ctx context.Context) error {
	n, err := d.a.appendSteps(ctx, d.req.Stream)
	if err != nil {
		return fmt.Errorf("store the workflow's events: %w", err)
	}
	d.res.Stream.add(n)
	return nil
}

func (d *delivery) appendConductor(ctx context.Context, evs []mapping.Event) error {
	n, err := d.a.appendConductor(ctx, d.req.Stream, d.req.TaskID, d.req.Plan, evs)
	if err != nil {
		return fmt.Errorf("store the conductor's events: %w", err)
	}
	d.res.Stream.add(n)
	return nil
}

// AppendRequest stores workflow steps that no other activity is left to
// carry: those of the workflow's very end.
type AppendRequest struct {
	Stream StreamInfo `json:"stream"`
}

// AppendEvents stores the steps of a request.
func (a *Activities) AppendEvents(ctx context.Context, req AppendRequest) (StreamCounts, error) {
	return a.appendSteps(ctx, &req.Stream)
}

// ReadEventsRequest asks for a stream's events from a byte offset.
type ReadEventsRequest struct {
	RunID  string `json:"runId"`
	Offset int64  `json:"offset"`
	// MaxWait: how long to wait for an event when there is none past
	// Offset yet; zero returns at once.
	MaxWait  time.Duration `json:"maxWait,omitempty"`
	MaxBytes int           `json:"maxBytes,omitempty"`
}

// ReadEventsResult is a page of the stream: whole events as stored, and
// the offset after them.
type ReadEventsResult struct {
	Lines []string `json:"lines,omitempty"`
	Next  int64    `json:"next"`
	// Missing: the stream has no file yet.
	Missing bool `json:"missing,omitempty"`
}

const (
	// maxPageBytes bounds a page: it travels in history twice (the
	// activity's result and the update's), far below the payload limit.
	maxPageBytes = 256 << 10
	// pageLinger gathers a burst of events into one page.
	pageLinger = 20 * time.Millisecond
)

// ReadEvents reads a stream from an offset, waiting up to MaxWait for its
// next event: the worker side of `starter events`, which may run on
// another machine than the files.
func (a *Activities) ReadEvents(ctx context.Context, req ReadEventsRequest) (ReadEventsResult, error) {
	stopBeat := heartbeat(ctx, heartbeatEvery)
	defer stopBeat()
	st, err := a.store()
	if err != nil {
		return ReadEventsResult{}, err
	}
	// The errors below say everything in their message: a cause would
	// only add its shorter text as the innermost one a client shows.
	if _, err := st.Path(req.RunID); err != nil {
		return ReadEventsResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadRead, nil)
	}
	limit := req.MaxBytes
	if limit <= 0 || limit > maxPageBytes {
		limit = maxPageBytes
	}
	p, err := st.Read(ctx, req.RunID, req.Offset, eventstream.ReadOptions{
		Wait: req.MaxWait, Linger: pageLinger, MaxBytes: limit, Poll: a.Config.TailPoll})
	if errors.Is(err, eventstream.ErrOffset) {
		return ReadEventsResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadRead, nil)
	}
	if err != nil {
		return ReadEventsResult{}, fmt.Errorf("read events of %s: %w", req.RunID, err)
	}
	return ReadEventsResult{Lines: p.Lines, Next: p.Next, Missing: p.Missing}, nil
}

// activityLogger is the activity's logger, or a silent one outside an activity
// (a test calling a method directly).
func activityLogger(ctx context.Context) interface{ Warn(string, ...any) } {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return nopLogger{}
}

type nopLogger struct{}

func (nopLogger) Warn(string, ...any) {}
