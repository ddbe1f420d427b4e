package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/mapping"
)

// Fencing. A task moves to another host when its own did not come back in
// time (the workflow gives the attempt up and starts a new one on the
// shared queue), but the conductor of the attempt given up may still be
// running there: the machine was cut off, or only its worker died. When
// that host's worker returns it must stop such a conductor, not re-attach
// to it: nothing will ever read its log again, and it would go on spending
// on work another host is redoing. Only the task's workflow knows which
// attempt is current and where it runs, so the host asks it (Judge decides
// from the answer).

// Run is a conductor run recorded under this host's work root whose
// process is still running.
type Run struct {
	TaskID string
	// Plan is the attempt's plan name, which is also its run directory.
	Plan string
}

// Current is what a task's workflow says of its current attempt: its
// number, the host that started it ("" when no host is known), and
// whether it is being started, when the host is not known yet.
type Current struct {
	Attempt int
	// Plan is the current attempt's plan name, its identity (it carries
	// the workflow chain's nonce); empty from a workflow that does not
	// say, whose attempt is then named by its number alone.
	Plan     string
	Host     string
	Starting bool
}

// Verdict is what a host does with one of its live runs.
type Verdict int

const (
	// Keep: the run is its task's current attempt on this host (or one
	// from before hosts were named): re-attach to it as after a restart.
	Keep Verdict = iota
	// Stop: the workflow moved on to another attempt, or runs this one on
	// another host.
	Stop
	// Later: the attempt is being started and its host is not known yet.
	Later
)

func (v Verdict) String() string {
	switch v {
	case Keep:
		return "keep"
	case Stop:
		return "stop"
	case Later:
		return "later"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Judge decides what host does with run, given its task's current
// attempt, and says why.
func Judge(run Run, cur Current, host string) (Verdict, string) {
	plan := cur.Plan
	if plan == "" {
		plan = mapping.PlanName(run.TaskID, cur.Attempt)
	}
	if run.Plan != plan {
		return Stop, fmt.Sprintf("the task's workflow is at attempt %d (plan %s)", cur.Attempt, plan)
	}
	switch {
	case cur.Host == host:
		return Keep, "the task's current attempt on this host"
	case cur.Host != "":
		return Stop, fmt.Sprintf("the task's workflow runs this attempt on host %s", cur.Host)
	case cur.Starting:
		return Later, "the attempt is being started and its host is not known yet"
	}
	return Keep, "the task's current attempt, started before hosts were named"
}

// Sweeper applies Judge to every live run of a host once its worker runs.
type Sweeper struct {
	Host string
	// Live lists the host's live runs.
	Live func() ([]Run, error)
	// Ask asks the task's workflow for its current attempt; found is false
	// when the task has no workflow.
	Ask func(ctx context.Context, taskID string) (cur Current, found bool, err error)
	// Stop stops a run's process group.
	Stop func(ctx context.Context, r Run) error
	Log  *slog.Logger
	// Retry is the first pause before runs left undecided are asked
	// about again (default 5 s); it doubles up to a minute.
	Retry time.Duration
	// Scale divides the default Retry and the minute it doubles up to:
	// the worker's time scale.
	Scale timescale.Scale
}

// Sweep judges every live run, stops the stale ones, and asks again about
// those it could not decide (an attempt still starting, a workflow that
// did not answer) until none is left or ctx ends. It returns how many
// runs it stopped.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	runs, err := s.Live()
	if err != nil {
		return 0, fmt.Errorf("list the live conductor runs: %w", err)
	}
	stopped := 0
	pause, longest := s.pauses()
	for len(runs) > 0 {
		var later []Run
		for _, r := range runs {
			switch s.judge(ctx, r) {
			case Stop:
				stopped++
			case Later:
				later = append(later, r)
			}
		}
		runs = later
		if len(runs) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return stopped, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, longest)
	}
	return stopped, nil
}

// pauses are the first pause before undecided runs are asked about again,
// and the longest it doubles up to.
func (s *Sweeper) pauses() (first, longest time.Duration) {
	first = s.Retry
	if first <= 0 {
		first = s.Scale.Of(5 * time.Second)
	}
	return first, s.Scale.Of(time.Minute)
}

// judge decides about one run and acts on it.
func (s *Sweeper) judge(ctx context.Context, r Run) Verdict {
	log := s.Log.With("task", r.TaskID, "plan", r.Plan)
	cur, found, err := s.Ask(ctx, r.TaskID)
	if err != nil {
		log.Warn("fence: the task's workflow did not say which attempt is current; asking again later", "error", err)
		return Later
	}
	if !found {
		// Nothing proves it stale: a workflow in another namespace, or one
		// whose history is gone. It is left alone rather than killed on a
		// guess.
		log.Warn("fence: no workflow for the task of a live conductor; leaving it running")
		return Keep
	}
	v, why := Judge(r, cur, s.Host)
	switch v {
	case Stop:
		if err := s.Stop(ctx, r); err != nil {
			log.Warn("fence: stopping a stale conductor failed; trying again later", "why", why, "error", err)
			return Later
		}
		log.Info("fence: stopped a conductor its workflow gave up", "why", why)
	case Later:
		log.Info("fence: asking again later", "why", why)
	default:
		log.Info("fence: keeping a live conductor", "why", why)
	}
	return v
}
