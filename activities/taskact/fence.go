package taskact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"go.temporal.io/sdk/activity"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/mapping"
)

// A task has at most one live conductor on a host: its workflow runs one
// attempt at a time and stops an attempt's conductor before it starts the
// next one, except when it gave an attempt up because its host did not
// come back in time. If that host returns and is handed the task's next
// attempt, the attempt given up may still run in the same working
// directory; starting an attempt therefore stops every other live run of
// the task under this work root first. The worker's start-up sweep
// (internal/fleet) stops the others, those of tasks that went elsewhere.

// LiveRun is a conductor run recorded under the work root whose process
// group still has a running member.
type LiveRun struct {
	TaskID string
	// Plan is the attempt's plan name. Dir is the run directory: the
	// plan's own, runs/<task>/<plan>, or, for a conductor resumed after a
	// pause, runs/<task>/<plan>-resume-N (ResumeConductor), which is the
	// same attempt.
	Plan   string
	Dir    string
	Handle ConductorHandle
}

// resumeDirName is the name of a resumed conductor's run directory.
var resumeDirName = regexp.MustCompile(`^(.+)-resume-[1-9][0-9]*$`)

// planOfRunDir is the plan whose conductor runs in dir. A resumed
// conductor's directory is named after its plan and sits beside the plan's
// own; the plan's directory must be there, since a plan name might end the
// same way (task "x-resume-1", whose first plan is karvi-x-resume-1).
func planOfRunDir(dir string) string {
	name := filepath.Base(dir)
	m := resumeDirName.FindStringSubmatch(name)
	if m == nil {
		return name
	}
	if fi, err := os.Stat(filepath.Join(filepath.Dir(dir), m[1])); err == nil && fi.IsDir() {
		return m[1]
	}
	return name
}

// LiveRuns lists the live runs under the work root: of one task, or of
// every task when taskID is empty. A record it cannot read is reported in
// the error, next to the runs it could list.
func (a *Activities) LiveRuns(taskID string) ([]LiveRun, error) {
	layout, err := activities.NewLayout(a.Config.WorkRoot)
	if err != nil {
		return nil, err
	}
	task := "*"
	if taskID != "" {
		if !activities.SafeName(taskID) {
			return nil, fmt.Errorf("taskId %q is not a safe directory name", taskID)
		}
		task = taskID
	}
	dirs, err := filepath.Glob(filepath.Join(layout.Root(), "runs", task, "*"))
	if err != nil {
		return nil, fmt.Errorf("list run directories: %w", err)
	}
	var runs []LiveRun
	var errs []error
	for _, dir := range dirs {
		h, ok, err := proc.Recorded(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		st, err := proc.Inspect(h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Alive || st.GroupAlive {
			runs = append(runs, LiveRun{TaskID: filepath.Base(filepath.Dir(dir)), Plan: planOfRunDir(dir), Dir: dir,
				Handle: handleOf(h)})
		}
	}
	return runs, errors.Join(errs...)
}

// StopRun stops a run's whole process group, as AbortConductor does. A
// live conductor's stop is recorded first in its run directory (stop, when
// it names who stops), so the delivery that sees it gone reports the stop
// instead of a crash (readStopRecord).
func (a *Activities) StopRun(ctx context.Context, r LiveRun, stop mapping.RuntimeStop) error {
	grace := a.Config.StopGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	// A run whose conductor is gone has only what it left behind (an
	// agent, or an agent's children): that is a sweep, and says so.
	if n, err := proc.Sweep(ctx, r.Handle.proc(), grace); err != nil || n > 0 {
		if err != nil {
			return fmt.Errorf("sweep the group %d of %s: %w", r.Handle.PGID, r.Plan, err)
		}
		activities.Logger(ctx).Warn("swept what a gone conductor left", "task", r.TaskID, "plan", r.Plan,
			"pgid", r.Handle.PGID, "processes", n)
		return nil
	}
	if stop.By != "" {
		if stop.At == "" {
			stop.At = time.Now().UTC().Format(time.RFC3339)
		}
		// Stopping matters more than saying why: a record that cannot be
		// written leaves the stop reported as the conductor's own end.
		if err := writeStopRecord(r.runDir(), stop); err != nil {
			activities.Logger(ctx).Warn("the stop of a conductor not recorded", "task", r.TaskID, "plan", r.Plan, "error", err)
		}
	}
	if err := proc.Stop(ctx, r.Handle.proc(), grace); err != nil {
		return fmt.Errorf("stop conductor group %d of %s: %w", r.Handle.PGID, r.Plan, err)
	}
	return nil
}

// runDir is the run's directory, from its record when it was not listed.
func (r LiveRun) runDir() string {
	if r.Dir != "" {
		return r.Dir
	}
	return filepath.Dir(r.Handle.ExitPath)
}

// stopRecordFile, in a run directory, records a stop the runtime made of
// its own accord (mapping.RuntimeStop). A run directory holds one
// conductor run, so the record is that run's.
const stopRecordFile = "stopped-by.json"

func writeStopRecord(dir string, stop mapping.RuntimeStop) error {
	data, err := json.Marshal(stop)
	if err != nil {
		return fmt.Errorf("encode the stop record: %w", err)
	}
	path := filepath.Join(dir, stopRecordFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readStopRecord is the stop recorded for the run whose handle is h, nil
// for none (or none readable: the end is then reported as the
// conductor's own).
func readStopRecord(h ConductorHandle) *mapping.RuntimeStop {
	if h.ExitPath == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(h.ExitPath), stopRecordFile))
	if err != nil {
		return nil
	}
	var stop mapping.RuntimeStop
	if json.Unmarshal(data, &stop) != nil || stop.By == "" {
		return nil
	}
	return &stop
}

// stopEarlierAttempts stops every live run of the task under this work
// root but plan's (its own or a resumed one), before plan's conductor
// starts.
func (a *Activities) stopEarlierAttempts(ctx context.Context, taskID, plan string) error {
	runs, err := a.LiveRuns(taskID)
	if err != nil {
		activities.Logger(ctx).Warn("some run records of the task could not be read", "task", taskID, "error", err)
	}
	for _, r := range runs {
		if r.Plan == plan {
			continue
		}
		activities.Logger(ctx).Warn("stopping a conductor of an attempt the task's workflow gave up",
			"task", taskID, "plan", r.Plan, "run", filepath.Base(r.Dir), "pgid", r.Handle.PGID, "starting", plan)
		stop := mapping.RuntimeStop{By: mapping.StopByStart, Host: a.Config.Host,
			Why: fmt.Sprintf("the task's workflow gave this attempt up and starts %s here", plan)}
		if err := a.StopRun(ctx, r, stop); err != nil {
			return err
		}
	}
	return nil
}

// untilWorkerStops is ctx, cancelled also once the worker running the
// activity begins to stop, and a report of whether it has: a delivery
// waits on it, so that a worker asked to stop hands its attempts back at
// once (see delivery.run) instead of holding them to the end of a wait.
func untilWorkerStops(ctx context.Context) (context.Context, func() bool, context.CancelFunc) {
	wctx, cancel := context.WithCancel(ctx)
	if !activity.IsActivity(ctx) {
		return wctx, func() bool { return false }, cancel
	}
	stop := activity.GetWorkerStopChannel(ctx)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-wctx.Done():
		}
	}()
	stopping := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	return wctx, stopping, cancel
}
