package runstatus

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"karvi-edda-temporal/runplan"
)

// Loop limits, as KARIMO applies them. A loop is one conductor attempt at
// the task: one run of its plan by the conductor, whatever the plan's own
// phases retry inside it.
const (
	// StallLoops is the loop_count at which a task is said to stall: on
	// sonnet it is upgraded to opus, on opus it goes to a person.
	StallLoops = 3
	// MaxLoops bounds the attempts of a task across its upgrade: after
	// StallLoops on sonnet, opus gets the rest.
	MaxLoops = 5
)

var (
	// ErrUnknownTask: the id names no task of the run.
	ErrUnknownTask = errors.New("unknown task")
	// ErrTransition: the call does not apply to the state the run or the
	// task is in.
	ErrTransition = errors.New("invalid transition")
	// ErrUnbound: the Status did not come from New and was not bound to its
	// run with Bind, so the reducer knows neither order nor dependencies.
	ErrUnbound = errors.New("status not bound to a run")
)

// Outcome is how a task's run ended: Done, or Failed with a reason; for
// a task with a worktree, Merged or a Conflict instead of Done.
type Outcome struct {
	state  TaskState
	reason string
	merged bool
	files  []string
}

// Done is the outcome of a task that succeeded and has no branch of its
// own to merge.
var Done = Outcome{state: TaskDone}

// Failed is the outcome of a task that failed; reason becomes its error.
func Failed(reason string) Outcome { return Outcome{state: TaskFailed, reason: reason} }

// Merged is the outcome of a task with a worktree that succeeded and
// whose branch is now merged into the feature branch: it is done.
var Merged = Outcome{state: TaskDone, merged: true}

// Conflict is the outcome of a task with a worktree that succeeded but
// whose branch did not merge: it needs a person to rebase it, and files
// (at least one) are the paths that conflicted.
func Conflict(files []string) Outcome {
	return Outcome{state: TaskNeedsHumanRebase, files: slices.Clone(files)}
}

// Escalation is what LoopLimitReached did with a stalled task.
type Escalation string

// Escalations.
const (
	// Upgraded: the task is queued again, on opus, its loop count reset.
	Upgraded Escalation = "upgraded"
	// ToPerson: the task is paused for a person (paused_reason stall).
	ToPerson Escalation = "to-person"
)

// New is the document of a run that has not started: the run ready, every
// task queued on the model the run file chose for it.
func New(run runplan.Run, createdAt time.Time) Status {
	s := Status{
		PRDSlug:   run.Slug,
		Status:    RunReady,
		CreatedAt: createdAt.UTC(),
		Tasks:     make(map[string]*Task, len(run.Tasks)),
		run:       run,
	}
	for _, t := range run.Tasks {
		s.Tasks[t.ID] = &Task{Status: TaskQueued, Model: run.Model(t.ID)}
	}
	return s
}

// Bind attaches a decoded document to the run it describes, so the
// reducer can go on from it (after a restart, say). The document must hold
// exactly the run's tasks.
func (s *Status) Bind(run runplan.Run) error {
	if s.PRDSlug != run.Slug {
		return fmt.Errorf("bind: document of run %q, not %q", s.PRDSlug, run.Slug)
	}
	var missing []string
	for _, t := range run.Tasks {
		if s.Tasks[t.ID] == nil {
			missing = append(missing, t.ID)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("bind: run %s: no entry for task %s", run.Slug, strings.Join(missing, ", "))
	}
	if len(s.Tasks) != len(run.Tasks) {
		var extra []string
		//workflowcheck:ignore the ids are sorted below
		for id := range s.Tasks {
			if _, ok := run.Task(id); !ok {
				extra = append(extra, id)
			}
		}
		slices.Sort(extra)
		return fmt.Errorf("bind: run %s: task %s not in the run", run.Slug, strings.Join(extra, ", "))
	}
	s.run = run
	return nil
}

// Clone is a copy sharing nothing with s but the run it is bound to.
func (s *Status) Clone() Status {
	c := *s
	if s.Summary != nil {
		sum := *s.Summary
		c.Summary = &sum
	}
	if s.Tasks != nil {
		c.Tasks = make(map[string]*Task, len(s.Tasks))
		//workflowcheck:ignore a copy of each, in whatever order
		for id, t := range s.Tasks {
			tc := *t
			tc.BlockedBy = slices.Clone(t.BlockedBy)
			tc.ConflictFiles = slices.Clone(t.ConflictFiles)
			c.Tasks[id] = &tc
		}
	}
	return c
}

// Start marks the run active.
func (s *Status) Start(at time.Time) error {
	if err := s.bound(); err != nil {
		return err
	}
	if s.Status != RunReady {
		return s.runError("start")
	}
	s.Status = RunActive
	s.StartedAt = at.UTC()
	return nil
}

// Pause stops the run from starting tasks: Ready is empty until Resume.
// Tasks already running go on and may still end.
func (s *Status) Pause() error {
	if err := s.bound(); err != nil {
		return err
	}
	if s.Status != RunActive {
		return s.runError("pause")
	}
	s.Status = RunPaused
	return nil
}

// PauseFor pauses the run as Pause does, for reason (PausedBudget: its
// budget is spent), recorded with the time until Resume.
func (s *Status) PauseFor(reason PausedReason, at time.Time) error {
	if err := s.Pause(); err != nil {
		return err
	}
	s.PausedReason, s.PausedAt = reason, at.UTC()
	return nil
}

// Resume lets a paused run start tasks again.
func (s *Status) Resume() error {
	if err := s.bound(); err != nil {
		return err
	}
	if s.Status != RunPaused {
		return s.runError("resume")
	}
	s.Status = RunActive
	s.PausedReason, s.PausedAt = "", time.Time{}
	return nil
}

// TaskStarted records that a task's workflow started on model. Only a task
// Ready returns may start.
func (s *Status) TaskStarted(id, model string, at time.Time) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	if s.Status != RunActive {
		return fmt.Errorf("task %s: cannot start: run %s is %s: %w", id, s.PRDSlug, s.Status, ErrTransition)
	}
	if t.Status != TaskQueued {
		return taskError(id, "start", t.Status)
	}
	if waiting := s.waitingOn(id); len(waiting) > 0 {
		return fmt.Errorf("task %s: cannot start: waits for %s: %w", id, strings.Join(waiting, ", "), ErrTransition)
	}
	t.Status = TaskRunning
	t.StartedAt = at.UTC()
	if model != "" {
		t.Model = model
	}
	t.CompletedAt, t.FailedAt, t.PausedAt = time.Time{}, time.Time{}, time.Time{}
	t.Error, t.PausedReason, t.BlockedBy = "", "", nil
	return nil
}

// TaskEnded records how a running task ended after loops more conductor
// attempts. A failed task blocks every task that depends on it, directly
// or through others; its worktree stays active for a person to look at.
//
// A task with a worktree (WorktreeCreated) ends through the merge of its
// branch, never plain Done: Merged makes it done (merged_at, its worktree
// pending-cleanup until WorktreeRemoved); a Conflict makes it
// needs-human-rebase (conflict_at, conflict_files) and its dependents
// keep waiting, since for them only a done or skipped task is finished.
// The workflow therefore keeps the task running from the end of its
// conductor until the merge has answered.
func (s *Status) TaskEnded(id string, outcome Outcome, loops int, at time.Time) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	switch outcome.state {
	case TaskDone, TaskFailed, TaskNeedsHumanRebase:
	default:
		return fmt.Errorf("task %s: outcome must be Done, Failed, Merged or a Conflict: %w", id, ErrTransition)
	}
	if loops < 0 {
		return fmt.Errorf("task %s: loops: %d is negative", id, loops)
	}
	if t.Status != TaskRunning {
		return taskError(id, "end", t.Status)
	}
	merge := outcome.merged || outcome.state == TaskNeedsHumanRebase
	switch {
	case merge && t.Branch == "":
		return fmt.Errorf("task %s: cannot merge: it has no worktree branch: %w", id, ErrTransition)
	case outcome.state == TaskDone && !merge && t.Branch != "":
		return fmt.Errorf("task %s: cannot end done: its branch %s is not merged (end it Merged, or with a Conflict): %w", id, t.Branch, ErrTransition)
	case outcome.state == TaskNeedsHumanRebase && len(outcome.files) == 0:
		return fmt.Errorf("task %s: a conflict names no file: %w", id, ErrTransition)
	}
	t.LoopCount += loops
	t.Status = outcome.state
	switch outcome.state {
	case TaskDone:
		t.CompletedAt = at.UTC()
		if outcome.merged {
			t.MergedAt = at.UTC()
			t.ConflictAt, t.ConflictFiles = time.Time{}, nil
			if t.WorktreeStatus == WorktreeActive {
				t.WorktreeStatus = WorktreePendingCleanup
			}
		}
	case TaskFailed:
		t.FailedAt = at.UTC()
		t.Error = outcome.reason
	case TaskNeedsHumanRebase:
		t.ConflictAt = at.UTC()
		t.ConflictFiles = slices.Clone(outcome.files)
	}
	s.reblock()
	return nil
}

// WorktreeCreated records the worktree a task works in: its branch and
// path (KARIMO writes the path relative to the repository), active,
// created at. The task is queued (about to start) or running. Recording
// the same worktree again changes nothing, so a task that goes round
// again (a retry, an upgrade) keeps its worktree and its creation time; a
// task whose worktree was removed may get a new one.
func (s *Status) WorktreeCreated(id, branch, path string, at time.Time) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	if t.Status != TaskQueued && t.Status != TaskRunning {
		return taskError(id, "record a worktree", t.Status)
	}
	if branch == "" || path == "" {
		return fmt.Errorf("task %s: a worktree needs a branch and a path: %w", id, ErrTransition)
	}
	if t.WorktreeStatus == WorktreeActive {
		if t.Branch == branch && t.Worktree == path {
			return nil
		}
		return fmt.Errorf("task %s: already has worktree %s on branch %s: %w", id, t.Worktree, t.Branch, ErrTransition)
	}
	t.Branch, t.Worktree = branch, path
	t.WorktreeStatus = WorktreeActive
	t.WorktreeCreatedAt = at.UTC()
	return nil
}

// WorktreeRemoved records that a task's worktree is gone: cleaned. The
// path and branch stay in the document as history. A running task's
// worktree is its conductor's working directory and cannot go.
func (s *Status) WorktreeRemoved(id string) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	if t.Status == TaskRunning {
		return taskError(id, "clean its worktree", t.Status)
	}
	if t.WorktreeStatus != WorktreeActive && t.WorktreeStatus != WorktreePendingCleanup {
		what := "it has none"
		if t.WorktreeStatus != "" {
			what = "it is " + string(t.WorktreeStatus)
		}
		return fmt.Errorf("task %s: cannot clean its worktree: %s: %w", id, what, ErrTransition)
	}
	t.WorktreeStatus = WorktreeCleaned
	return nil
}

// RetryMerge takes a task that needs a rebase back to running, for its
// branch to be merged again: a person rebased it (or merged the feature
// branch into it) and asks to go on. Its conductor does not run again and
// its loop count stays; the merge that follows ends it with TaskEnded, as
// Merged, or as another Conflict. Retry refuses such a task, which has
// nothing left to run; Skip gives up on it. The run may be paused: a
// merge is not a start.
func (s *Status) RetryMerge(id string) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	if t.Status != TaskNeedsHumanRebase {
		return taskError(id, "retry the merge", t.Status)
	}
	t.Status = TaskRunning
	t.ConflictAt, t.ConflictFiles = time.Time{}, nil
	return nil
}

// LoopLimitReached records that a running task stalled: after loops more
// conductor attempts its loop count reached its limit (LoopsLeft was 0
// before the next attempt). A task on sonnet that was never upgraded is
// queued again on opus with its count reset, once; any other goes to a
// person: paused, reason stall. Its dependents wait either way.
func (s *Status) LoopLimitReached(id string, loops int, at time.Time) (Escalation, error) {
	t, err := s.task(id)
	if err != nil {
		return "", err
	}
	if t.Status != TaskRunning {
		return "", taskError(id, "stall", t.Status)
	}
	if loops < 0 {
		return "", fmt.Errorf("task %s: loops: %d is negative", id, loops)
	}
	if n, limit := t.LoopCount+loops, loopLimit(t); n < limit {
		return "", fmt.Errorf("task %s: loop limit not reached: %d of %d loops: %w", id, n, limit, ErrTransition)
	}
	t.LoopCount += loops
	if t.Model == runplan.ModelSonnet && t.ModelUpgrades == 0 {
		t.Model = runplan.ModelOpus
		t.ModelUpgrades++
		t.LoopCount = 0
		t.Status = TaskQueued
		return Upgraded, nil
	}
	t.Status = TaskPaused
	t.PausedReason = PausedStall
	t.PausedAt = at.UTC()
	return ToPerson, nil
}

// LoopsLeft is how many conductor attempts the task may still make before
// it stalls: StallLoops on the model it started on, and after an upgrade
// what MaxLoops leaves.
func (s *Status) LoopsLeft(id string) (int, error) {
	t, err := s.task(id)
	if err != nil {
		return 0, err
	}
	return max(0, loopLimit(t)-t.LoopCount), nil
}

func loopLimit(t *Task) int {
	if t.ModelUpgrades > 0 {
		return MaxLoops - StallLoops
	}
	return StallLoops
}

// Skip gives up on a task that is not running and has not succeeded
// (queued, blocked, failed, paused, or needing a rebase). For its
// dependents a skipped task counts as done.
func (s *Status) Skip(id string) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	switch t.Status {
	case TaskQueued, TaskBlocked, TaskFailed, TaskPaused, TaskNeedsHumanRebase:
	default:
		return taskError(id, "skip", t.Status)
	}
	t.Status = TaskSkipped
	t.BlockedBy = nil
	s.reblock()
	return nil
}

// Retry queues a failed task, or one paused for a person, again with a
// fresh loop count (its model and upgrade stay). The tasks it blocked wait
// for it again instead.
func (s *Status) Retry(id string) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	if t.Status != TaskFailed && t.Status != TaskPaused {
		return taskError(id, "retry", t.Status)
	}
	t.Status = TaskQueued
	t.LoopCount = 0
	t.Error, t.PausedReason = "", ""
	t.FailedAt, t.PausedAt = time.Time{}, time.Time{}
	s.reblock()
	return nil
}

// Abort ends the run now: running tasks fail ("run aborted"), the rest stay
// as they are, and the run ends as Complete would end it.
func (s *Status) Abort(at time.Time) error {
	if err := s.bound(); err != nil {
		return err
	}
	if s.ended() {
		return s.runError("abort")
	}
	for _, rt := range s.run.Tasks {
		if t := s.Tasks[rt.ID]; t.Status == TaskRunning {
			t.Status = TaskFailed
			t.FailedAt = at.UTC()
			t.Error = "run aborted"
		}
	}
	s.reblock()
	s.finish(at)
	return nil
}

// Complete ends a finished run: complete when every task is done or
// skipped, partial otherwise, with the summary.
func (s *Status) Complete(at time.Time) error {
	if err := s.bound(); err != nil {
		return err
	}
	if s.ended() {
		return s.runError("complete")
	}
	if !s.Finished() {
		var busy []string
		for _, rt := range s.run.Tasks {
			if s.Tasks[rt.ID].Status == TaskRunning {
				busy = append(busy, rt.ID)
			}
		}
		busy = append(busy, s.startable()...)
		return fmt.Errorf("run %s: cannot complete: task %s can still run: %w", s.PRDSlug, strings.Join(busy, ", "), ErrTransition)
	}
	s.finish(at)
	return nil
}

// Ready lists the tasks that may start now, in run file order: queued,
// every dependency done or skipped, the run active. Capping them to the
// run's concurrency is the caller's part.
func (s *Status) Ready() []string {
	if s.Status != RunActive || s.bound() != nil {
		return nil
	}
	return s.startable()
}

// Finished reports whether the run can go no further by itself: it has
// ended, or no task runs and none could start. Tasks may still wait on a
// failed or stalled one, which a person can skip or retry.
func (s *Status) Finished() bool {
	if s.ended() {
		return true
	}
	if s.bound() != nil {
		return false
	}
	for _, rt := range s.run.Tasks {
		if s.Tasks[rt.ID].Status == TaskRunning {
			return false
		}
	}
	return len(s.startable()) == 0
}

func (s *Status) finish(at time.Time) {
	s.CompletedAt = at.UTC()
	s.Status = RunComplete
	s.PausedReason, s.PausedAt = "", time.Time{} // an ended run is not paused
	sum := &Summary{TotalTasks: len(s.run.Tasks)}
	for _, rt := range s.run.Tasks {
		t := s.Tasks[rt.ID]
		switch t.Status {
		case TaskDone:
			sum.Successful++
		case TaskSkipped:
			sum.Skipped++
		case TaskFailed:
			sum.Failed++
		}
		if t.Status != TaskDone && t.Status != TaskSkipped {
			s.Status = RunPartial
		}
		sum.TotalLoops += t.LoopCount
		sum.ModelUpgrades += t.ModelUpgrades
	}
	if !s.StartedAt.IsZero() && s.CompletedAt.After(s.StartedAt) {
		sum.DurationMinutes = int(s.CompletedAt.Sub(s.StartedAt) / time.Minute)
	}
	s.Summary = sum
}

// startable lists the queued tasks whose dependencies are all done or
// skipped, in run file order.
func (s *Status) startable() []string {
	var ids []string
	for _, rt := range s.run.Tasks {
		if s.Tasks[rt.ID].Status == TaskQueued && len(s.waitingOn(rt.ID)) == 0 {
			ids = append(ids, rt.ID)
		}
	}
	return ids
}

// waitingOn lists the dependencies of a task that are neither done nor
// skipped.
func (s *Status) waitingOn(id string) []string {
	rt, _ := s.run.Task(id)
	var ids []string
	for _, d := range rt.Depends {
		if st := s.Tasks[d].Status; st != TaskDone && st != TaskSkipped {
			ids = append(ids, d)
		}
	}
	return ids
}

// reblock sets every task that has not started to blocked, naming the
// failed tasks upstream of it, or back to queued when there are none. A
// done or skipped task stops the search: what it depended on no longer
// matters to its dependents.
func (s *Status) reblock() {
	// Without a failed task nothing is blocked, and without a blocked one
	// nothing is to unblock: a run of thousands of tasks ending one by one
	// takes this way almost every time.
	if !s.anyIn(TaskFailed, TaskBlocked) {
		return
	}
	failedUp := make(map[string][]string, len(s.run.Tasks))
	for _, level := range s.run.Order() {
		for _, id := range level {
			rt, _ := s.run.Task(id)
			var names []string
			add := func(f string) {
				if !slices.Contains(names, f) {
					names = append(names, f)
				}
			}
			for _, d := range rt.Depends {
				switch s.Tasks[d].Status {
				case TaskFailed:
					add(d)
				case TaskDone, TaskSkipped:
				default:
					for _, f := range failedUp[d] {
						add(f)
					}
				}
			}
			slices.SortFunc(names, func(a, b string) int { return s.run.Pos(a) - s.run.Pos(b) })
			failedUp[id] = names
			switch t := s.Tasks[id]; {
			case t.Status != TaskQueued && t.Status != TaskBlocked:
			case len(names) > 0:
				t.Status, t.BlockedBy = TaskBlocked, names
			default:
				t.Status, t.BlockedBy = TaskQueued, nil
			}
		}
	}
}

// anyIn: some task is in one of the states.
func (s *Status) anyIn(states ...TaskState) bool {
	for _, rt := range s.run.Tasks {
		if t := s.Tasks[rt.ID]; t != nil && slices.Contains(states, t.Status) {
			return true
		}
	}
	return false
}

func (s *Status) ended() bool { return s.Status == RunComplete || s.Status == RunPartial }

func (s *Status) bound() error {
	if len(s.run.Tasks) == 0 {
		return ErrUnbound
	}
	return nil
}

// task finds a task of a run that has not ended.
func (s *Status) task(id string) (*Task, error) {
	if err := s.bound(); err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	if _, ok := s.run.Task(id); !ok || s.Tasks[id] == nil {
		return nil, fmt.Errorf("task %s: %w", id, ErrUnknownTask)
	}
	if s.ended() {
		return nil, fmt.Errorf("task %s: run %s is %s: %w", id, s.PRDSlug, s.Status, ErrTransition)
	}
	return s.Tasks[id], nil
}

func (s *Status) runError(op string) error {
	return fmt.Errorf("run %s: cannot %s: it is %s: %w", s.PRDSlug, op, s.Status, ErrTransition)
}

func taskError(id, op string, st TaskState) error {
	return fmt.Errorf("task %s: cannot %s: it is %s: %w", id, op, st, ErrTransition)
}

// PauseTask records that a running task paused by itself for reason
// (PausedUsageLimit: its agent's account is out of usage until a reset;
// PausedBudget: its own budget is spent until a person raises it). Its
// conductor is stopped meanwhile and its dependents wait; ResumeTask
// records that it runs again.
func (s *Status) PauseTask(id string, reason PausedReason, at time.Time) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	if reason != PausedUsageLimit && reason != PausedBudget {
		return fmt.Errorf("task %s: cannot pause for %q: only %s or %s pauses a running task: %w", id, reason, PausedUsageLimit, PausedBudget, ErrTransition)
	}
	if t.Status != TaskRunning {
		return taskError(id, "pause", t.Status)
	}
	t.Status, t.PausedReason, t.PausedAt = TaskPaused, reason, at.UTC()
	return nil
}

// StallTask records that a running task's phase shows no progress since
// at; UnstallTask that it shows progress again (or the stall ended the
// attempt). A task that is not running keeps no stall.
func (s *Status) StallTask(id, phase string, at time.Time) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	if t.Status != TaskRunning {
		return taskError(id, "mark stalled", t.Status)
	}
	t.StalledAt, t.StalledPhase = at.UTC(), phase
	return nil
}

// UnstallTask clears what StallTask recorded.
func (s *Status) UnstallTask(id string) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	t.StalledAt, t.StalledPhase = time.Time{}, ""
	return nil
}

// ResumeTask records that a task PauseTask paused runs again.
func (s *Status) ResumeTask(id string) error {
	t, err := s.task(id)
	if err != nil {
		return err
	}
	if t.Status != TaskPaused || t.PausedReason != PausedUsageLimit {
		return taskError(id, "resume", t.Status)
	}
	t.Status, t.PausedReason, t.PausedAt = TaskRunning, "", time.Time{}
	return nil
}
