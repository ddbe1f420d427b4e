package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/mapping/redact"
)

// LoopMode is how a Loop learns that events.jsonl grew.
type LoopMode string

const (
	// Notify waits on the tailer's inotify watch: the floor, the same
	// primitive the worker's TailEvents uses, minus Temporal.
	Notify LoopMode = "direct"
	// Poll re-reads the file every Loop.Interval, as most tailers do.
	Poll LoopMode = "poll"
)

// Loop tails one conductor's events.jsonl and PATCHes karvi's brief with no
// workflow in between: parse, redact, reduce and send each event in order,
// exactly the per-event work of the worker.
type Loop struct {
	Mode       LoopMode
	Interval   time.Duration // Poll only; default 250ms
	EventsPath string
	TaskID     string
	Summary    mapping.PlanSummary
	Karvi      *karvi.Client
}

// LoopStats is what a Loop did.
type LoopStats struct {
	Events, Patches, Malformed int
}

const loopMaxBytes = 256 << 10

// Run sends the skeleton patch, then follows the log until a terminal
// event or until ctx is done (which is not an error: the caller stops
// loops once the workflow it shadows has ended).
func (l Loop) Run(ctx context.Context) (LoopStats, error) {
	var stats LoopStats
	st := mapping.NewBriefState(l.TaskID, l.Summary)
	var enc mapping.BriefEncoder
	if err := l.Karvi.PatchBrief(ctx, l.TaskID, enc.Init(&st).Body); err != nil {
		return stats, fmt.Errorf("%s loop %s: skeleton patch: %w", l.Mode, l.TaskID, err)
	}
	var w *tailer.Waiter
	var tick *time.Ticker
	switch l.Mode {
	case Notify:
		var err error
		if w, err = tailer.NewWaiter(l.EventsPath); err != nil {
			return stats, fmt.Errorf("%s loop %s: %w", l.Mode, l.TaskID, err)
		}
		defer w.Close()
	case Poll:
		every := l.Interval
		if every <= 0 {
			every = 250 * time.Millisecond
		}
		tick = time.NewTicker(every)
		defer tick.Stop()
	default:
		return stats, fmt.Errorf("loop mode %q: want %q or %q", l.Mode, Notify, Poll)
	}
	var cur tailer.Cursor
	for {
		var b tailer.Batch
		var err error
		if w != nil {
			b, err = w.Wait(ctx, cur, tailer.WaitOptions{MaxWait: 5 * time.Second, MaxBytes: loopMaxBytes})
		} else {
			select {
			case <-ctx.Done():
				return stats, nil
			case <-tick.C:
			}
			b, err = tailer.ReadFrom(l.EventsPath, cur, loopMaxBytes)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return stats, nil
		}
		if err != nil {
			return stats, fmt.Errorf("%s loop %s: tail: %w", l.Mode, l.TaskID, err)
		}
		cur = b.Next
		done := false
		for _, line := range b.Lines {
			if line.TooLong {
				stats.Malformed++
				continue
			}
			ev, err := mapping.ParseEvent(line.Data)
			if err != nil {
				stats.Malformed++
				continue
			}
			ev.Pos = mapping.Position{Gen: line.Gen, Offset: line.Offset}
			ev.MapText(redact.String)
			stats.Events++
			if c, ok := st.Reduce(ev); ok {
				p := enc.Patch(&st, c)
				if err := l.Karvi.PatchBrief(ctx, l.TaskID, p.Body); err != nil {
					if ctx.Err() != nil {
						return stats, nil
					}
					return stats, fmt.Errorf("%s loop %s: patch: %w", l.Mode, l.TaskID, err)
				}
				stats.Patches++
			}
			done = done || ev.IsTerminal()
		}
		if done {
			return stats, nil
		}
	}
}
