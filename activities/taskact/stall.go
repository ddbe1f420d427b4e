package taskact

import (
	"context"
	"time"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/stalls"
)

// A phase stalls when its conductor writes no event and its agent no
// transcript line for longer than a threshold (package stalls). The
// delivering tail sees both: every event line it delivers and, through
// the transcript watch of limits.go, every line an agent writes. It
// carries the time of the last of them from checkpoint to checkpoint
// (StallWatch.ProgressAt) and returns to the workflow as soon as the
// threshold passes, which reports the stall and acts on it; while the
// workflow reports a stall, the next delivery returns as soon as progress
// resumes.

// StallWatch is what a delivery asks of the stall watch and reports of
// it; it is embedded in DeliverRequest and DeliverResult.
type StallWatch struct {
	// WatchStalls turns the watch on (it needs WatchLimits: the
	// transcripts are read by that watch). Workflows that began before it
	// existed leave it off.
	WatchStalls bool `json:"watchStalls,omitempty"`
	// StallAfter is the dispatch's threshold, zero for the worker's
	// (Config.StallAfter); OnStall the dispatch's action, "" for the
	// worker's (Config.OnStall).
	StallAfter time.Duration `json:"stallAfter,omitempty"`
	OnStall    string        `json:"onStall,omitempty"`
	// ProgressAt is the last sign of progress: the workflow's checkpoint
	// on the way in (zero: the call's start), the new one on the way out.
	ProgressAt time.Time `json:"progressAt,omitzero"`
	// Stalled: the workflow reports a stall under way. The call then
	// reports no new one and returns as soon as progress resumes.
	Stalled bool `json:"stalled,omitempty"`
	// Stall is a stall this call saw begin, nil for none.
	Stall *Stall `json:"stall,omitempty"`
}

// Stall is a phase that stalled.
type Stall struct {
	// Phase is the phase under way ("" before the first phase started).
	Phase string `json:"phase,omitempty"`
	// Since is the last sign of progress; SeenAt when the threshold After
	// had passed.
	Since  time.Time     `json:"since"`
	SeenAt time.Time     `json:"seenAt"`
	After  time.Duration `json:"after"`
	// Action is what follows: warn, redispatch or abort.
	Action stalls.Action `json:"action"`
}

// stallRecheck is how often a delivery under a stall looks whether the
// agent wrote to its transcript again (the event log wakes it by itself).
// The time scale shortens it down to limitPoll, how often the transcripts
// are read at most.
const stallRecheck = time.Second

// stallRecheckEvery is stallRecheck at the worker's time scale.
func (d *delivery) stallRecheckEvery() time.Duration {
	return max(d.a.Config.Scale.Of(stallRecheck), limitPoll)
}

// stallWatch is a delivery's view of the watch.
type stallWatch struct {
	after  time.Duration
	action stalls.Action
	// progress is the last event line's time; the transcripts' is the
	// limit watcher's.
	progress time.Time
	limits   *limitWatcher
}

// newStallWatch is the watch a delivery runs, nil when it runs none.
func (d *delivery) newStallWatch(now time.Time) *stallWatch {
	r := d.req
	if !r.WatchStalls || !r.WatchLimits || d.limits == nil || r.MaxWait <= 0 {
		return nil
	}
	timeout := time.Duration(r.Plan.Summary.TimeoutSec) * time.Second
	after := stalls.Effective(r.StallAfter, d.a.Config.StallAfter, timeout)
	if after <= 0 {
		return nil
	}
	action, err := stalls.ParseAction(r.OnStall)
	if r.OnStall == "" || err != nil {
		action = d.a.Config.OnStall
		if action == "" {
			action = stalls.Warn
		}
	}
	p := r.ProgressAt
	if p.IsZero() {
		p = now
	}
	return &stallWatch{after: after, action: action, progress: p, limits: d.limits}
}

// last is the last sign of progress, events and transcripts together.
func (s *stallWatch) last() time.Time {
	p := s.progress
	s.limits.mu.Lock()
	t := s.limits.progress
	s.limits.mu.Unlock()
	if t.After(p) {
		p = t
	}
	return p
}

// stallWait bounds the wait for the next line: until the threshold passes, or
// while a stall is reported, the next look at the transcripts. ok false:
// take the checkpoint now (a stall began, or progress resumed).
func (d *delivery) stallWait(ctx context.Context, s *stallWatch, now time.Time, wait time.Duration) (time.Duration, bool) {
	if s == nil {
		return wait, true
	}
	last := s.last()
	if d.req.Stalled {
		if last.After(d.req.ProgressAt) && !d.req.ProgressAt.IsZero() {
			return 0, false // progress again: the workflow ends the stall
		}
		return min(wait, d.stallRecheckEvery()), true
	}
	until := stalls.Until(last, now, s.after)
	if until > 0 {
		return min(wait, until), true
	}
	d.res.Stall = &Stall{Phase: d.brief.Brief.CurrentPhase, Since: last.UTC(), SeenAt: now.UTC(), After: s.after, Action: s.action}
	activities.Logger(ctx).Warn("phase stalled", "task", d.req.TaskID, "phase", d.res.Stall.Phase,
		"silentFor", now.Sub(last).Round(time.Second).String(), "action", s.action)
	return 0, false
}

// endStallWatch records the watch's clock in the result.
func (d *delivery) endStallWatch(s *stallWatch) {
	if s == nil {
		return
	}
	d.res.WatchStalls = true
	d.res.ProgressAt = s.last().UTC()
	d.res.Stalled = d.req.Stalled || d.res.Stall != nil
}

// line notes event lines read at now.
func (s *stallWatch) line(now time.Time) {
	if s != nil {
		s.progress = now
	}
}
