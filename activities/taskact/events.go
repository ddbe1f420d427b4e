package taskact

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities"
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

func (a *Activities) store() (*eventstream.Store, error) { return a.streams.Open(a.Config) }

// appendStream stores events in the stream runID and reports what happened
// to them. An error is retryable: the activity fails, is retried from the
// workflow's checkpoint, and sends the events again.
func (a *Activities) appendStream(ctx context.Context, runID string, evs []canonical.Event) (activities.StreamCounts, error) {
	if len(evs) == 0 {
		return activities.StreamCounts{}, nil
	}
	st, err := a.store()
	if err != nil {
		return activities.StreamCounts{}, err
	}
	return activities.AppendTo(ctx, st, runID, evs)
}

// appendSteps stores the workflow's steps a request carries.
func (a *Activities) appendSteps(ctx context.Context, s *StreamInfo) (activities.StreamCounts, error) {
	if s == nil {
		return activities.StreamCounts{}, nil
	}
	return a.appendStream(ctx, s.RunID, s.Steps)
}

// appendConductor maps an attempt's conductor events and stores them.
func (a *Activities) appendConductor(ctx context.Context, s *StreamInfo, taskID string, plan PlanInfo, evs []mapping.Event) (activities.StreamCounts, error) {
	if s == nil || len(evs) == 0 {
		return activities.StreamCounts{}, nil
	}
	cctx := ConductorContext(taskID, plan, *s, a.phaseAttempts(plan.PlanPath))
	out := make([]canonical.Event, 0, len(evs))
	mapWarnings := 0
	for _, ev := range evs {
		c, warns := canonical.FromConductor(ev, cctx)
		for _, w := range warns {
			activities.Logger(ctx).Warn("canonical event kept with a warning", "run", s.RunID, "warning", c.RawRef+": "+w.String())
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
	d.res.Stream.Add(n)
	return nil
}

func (d *delivery) appendConductor(ctx context.Context, evs []mapping.Event) error {
	n, err := d.a.appendConductor(ctx, d.req.Stream, d.req.TaskID, d.req.Plan, evs)
	if err != nil {
		return fmt.Errorf("store the conductor's events: %w", err)
	}
	d.res.Stream.Add(n)
	return nil
}

// AppendRequest stores workflow steps that no other activity is left to
// carry: those of the workflow's very end.
type AppendRequest struct {
	Stream StreamInfo `json:"stream"`
}

// AppendEvents stores the steps of a request.
func (a *Activities) AppendEvents(ctx context.Context, req AppendRequest) (activities.StreamCounts, error) {
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
	stopBeat := activities.Heartbeat(ctx, activities.HeartbeatEvery)
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
