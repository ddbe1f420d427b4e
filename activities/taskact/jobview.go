package taskact

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/activity"

	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/mapping/redact"
)

// The job view rides along with delivery. The workflow never sees single
// events, so the tail, which reads them, folds each into the attempt's
// jobview.Tally and hands it back at every checkpoint, as it does the
// brief; the next delivery takes it up from there. At each checkpoint the
// tally also reads state.json (are the current phase's checks running?
// what did the last try's checks say?), and when the attempt ends there it
// writes metrics.json into the run directory.

// MetricsFile is the attempt's metrics, in its run directory.
const MetricsFile = "metrics.json"

// newTally is the tally of an attempt with no event folded in yet.
// partial says delivery starts past the beginning of the log, without a
// tally (a workflow that ran before the job view existed).
func (a *Activities) newTally(info PlanInfo, attempt int, model *string, partial bool) *jobview.Tally {
	s := jobview.Seed{Plan: a.cachedPlan(info.PlanPath), PhaseIDs: info.Summary.PhaseIDs,
		Attempt: attempt, Worktree: info.Cwd, Partial: partial}
	if model != nil {
		s.Model = *model
	}
	t := jobview.NewTally(s)
	// Check names quote the plan's commands, and the tally goes to
	// history: redacted like everything else on its way there.
	for i := range t.Phases {
		for j, name := range t.Phases[i].Checks {
			t.Phases[i].Checks[j] = redact.String(name)
		}
	}
	return t
}

// cachedPlan is the attempt's plan from the cache the explainer fills, or
// read now; nil when it cannot be read.
func (a *Activities) cachedPlan(path string) *mapping.Plan {
	if cached, ok := a.plans.Load(path); ok {
		return cached.(*mapping.Plan)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	p, err := mapping.ParsePlan(data)
	if err != nil {
		return nil
	}
	a.plans.Store(path, &p)
	return &p
}

// tally is the delivery's tally: the checkpoint's, else a new one.
func (d *delivery) tally() *jobview.Tally {
	if d.job == nil {
		if d.req.Job != nil {
			d.job = d.req.Job.Clone()
		} else {
			d.job = d.a.newTally(d.req.Plan, 0, nil, d.req.Cursor != TailCursor{})
		}
	}
	return d.job
}

// tallyBatch folds a batch's events, token usage included, into the tally.
func (d *delivery) tallyBatch(evs []mapping.Event) {
	t := d.tally()
	for _, ev := range evs {
		t.Observe(ev)
	}
}

// checkpointTally is the tally a checkpoint reports: with what state.json
// says now and, when the attempt ended at this checkpoint, its run files,
// whose metrics.json it writes.
func (d *delivery) checkpointTally(ctx context.Context) *jobview.Tally {
	t := d.tally()
	if s, ok := readJobState(d.req.Plan.StatePath); ok {
		t.ObserveState(s)
		t.ObserveSpend(transcriptCosts(filepath.Join(filepath.Dir(d.req.Plan.StatePath), transcriptsDir)))
	}
	if d.res.Outcome == nil && !d.res.Exited {
		return t
	}
	path := filepath.Join(d.req.Plan.RunDir, MetricsFile)
	err := writeMetrics(path, t.Metrics(d.req.TaskID, ""))
	if err != nil && activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn("attempt metrics not written", "path", path, "error", err)
	}
	t.Artifacts = t.Artifacts[:0]
	for _, p := range []string{d.req.Plan.EventsPath, d.req.Plan.StatePath, path} {
		if _, err := os.Stat(p); err == nil {
			t.Artifacts = append(t.Artifacts, p)
		}
	}
	return t
}

// readJobState reads state.json for the job view, redacted like every
// other thing the conductor writes; false when it is missing or unreadable
// (the conductor writes it soon, or the outcome rules report it).
func readJobState(path string) (jobview.State, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return jobview.State{}, false
	}
	s, err := jobview.ParseState(redact.JSON(data))
	return s, err == nil
}

// writeMetrics replaces path with m atomically: a reader sees the old file
// or the new one, and a retried delivery that writes again writes the
// same.
func writeMetrics(path string, m jobview.Metrics) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode metrics: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".metrics-*.json")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
