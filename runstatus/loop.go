package runstatus

import (
	"time"

	"karvi-edda-temporal/runplan"
)

// Looped records that a running task's conductor attempt ended without the
// task being done: its loop_count goes up by one at once, so the document
// shows the loops a task has made while it is still at work. The caller then
// decides by LoopsLeft whether the task loops again, is upgraded or fails.
func (s *Status) Looped(id string) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	if t.Status != TaskRunning {
		return taskError(id, "loop", t.Status)
	}
	t.LoopCount++
	return nil
}

// CanUpgrade reports whether a stalled task would be moved to the stronger
// model (LoopLimitReached answers Upgraded) rather than handed to a person.
func (s *Status) CanUpgrade(id string) bool {
	t := s.Tasks[id]
	return t != nil && t.Model == runplan.ModelSonnet && t.ModelUpgrades == 0
}

// AbortWith ends the run now like Abort, its running tasks failed with
// reason instead of "run aborted": a run stopped by its budget says so on
// every task it stopped.
func (s *Status) AbortWith(reason string, at time.Time) error {
	running := map[string]bool{}
	for _, rt := range s.run.Tasks {
		if t := s.Tasks[rt.ID]; t != nil && t.Status == TaskRunning {
			running[rt.ID] = true
		}
	}
	if err := s.Abort(at); err != nil {
		return err
	}
	if reason == "" {
		return nil
	}
	for _, rt := range s.run.Tasks {
		if running[rt.ID] {
			s.Tasks[rt.ID].Error = reason
		}
	}
	return nil
}

// Reopen takes an ended run back to active, so that a person can retry or
// skip what kept it from completing: its summary and end time go, every
// task stays as it ended.
func (s *Status) Reopen() error {
	if err := s.bound(); err != nil {
		return err
	}
	if !s.ended() {
		return s.runError("reopen")
	}
	s.Status = RunActive
	s.CompletedAt = time.Time{}
	s.Summary = nil
	return nil
}
