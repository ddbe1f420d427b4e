package intake

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runplan"
)

// Kind is what an action asks the intake workflow to do.
type Kind string

// Action kinds, in the order a tick carries them out.
const (
	// KindAbort: the board cancelled (or deleted) a task that runs here:
	// abort its workflow (WorkflowID; a run's task when the id is a run's).
	KindAbort Kind = "abort"
	// KindPauseRun and KindResumeRun: the board paused or resumed the
	// project of a run.
	KindPauseRun  Kind = "pause_run"
	KindResumeRun Kind = "resume_run"
	// KindRedispatch: the board sent a task that ran here to an end back
	// to work; Dispatch is the plan in redispatch mode.
	KindRedispatch Kind = "redispatch"
	// KindStartRun: a project whose tasks are all routed here becomes a
	// run; RunFile is the run file, valid for runplan.Parse.
	KindStartRun Kind = "start_run"
	// KindStart: claim a task and start its workflow with Dispatch.
	KindStart Kind = "start"
	// KindBlock: the task cannot run here; mark it blocked on karvi with
	// Reason. karvi refuses dispatched -> blocked, so the executor writes
	// in_progress first, then blocked.
	KindBlock Kind = "block"
	// KindIgnore: nothing to do; Reason is for the log.
	KindIgnore Kind = "ignore"
)

var kindRank = map[Kind]int{
	KindAbort: 0, KindPauseRun: 1, KindResumeRun: 2, KindRedispatch: 3,
	KindStartRun: 4, KindStart: 5, KindBlock: 6, KindIgnore: 7,
}

// StaleLimit is how many boards in a row older than the cursor the intake
// ignores before it takes karvi's _version as having gone back for good
// (board.json restored or replaced) and reads the board as a new baseline.
// One feed rarely delivers boards out of order, so a few in a row mean
// karvi's count restarted.
const StaleLimit = 3

// Action is one thing a tick asks for.
type Action struct {
	Kind      Kind   `json:"kind"`
	TaskID    string `json:"taskId,omitempty"`
	ProjectID string `json:"projectId,omitempty"`
	// WorkflowID is the workflow acted on: karvi-task-<id> for a task on
	// its own, the run's workflow for a project and its tasks.
	WorkflowID string `json:"workflowId,omitempty"`
	// Attempt is the task's dispatch count, so the executor can make each
	// start or redispatch idempotent.
	Attempt  int                   `json:"attempt,omitempty"`
	Dispatch *mapping.DispatchPlan `json:"dispatch,omitempty"`
	RunFile  json.RawMessage       `json:"runFile,omitempty"`
	// Paused starts a run paused (its project is paused on the board).
	Paused bool   `json:"paused,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Key is the claim's key (the run's, for a project): the executor
	// marks the workflows it starts with it and acts only on a workflow
	// that carries it.
	Key int64 `json:"key,omitempty"`
}

// Reconcile compares one board snapshot with what the intake has claimed
// and returns the actions to take, in a fixed order, and the state to keep.
// The caller must keep the returned state before (or atomically with)
// carrying out the actions: a claim is recorded once and never made again.
//
// A snapshot older than one already seen (a lower _version) yields no
// action; only StaleLimit of them in a row make a new baseline.
func Reconcile(b Board, st State, cfg Config) ([]Action, State) {
	var rebase *Action
	if b.Version < st.Version {
		if st.Stale+1 < StaleLimit {
			next := st.clone()
			next.Stale++
			return []Action{{Kind: KindIgnore, Reason: fmt.Sprintf("stale board: _version %d is older than %d already seen", b.Version, st.Version)}}, next
		}
		rebase = &Action{Kind: KindIgnore, Reason: fmt.Sprintf("karvi's _version went back from %d to %d for %d boards in a row (board restored or replaced?): reading it as the new baseline", st.Version, b.Version, StaleLimit)}
	}
	r := reconciler{b: b, cfg: cfg, next: st.clone(), index: map[string]int{}}
	r.next.Version, r.next.Stale = b.Version, 0
	if rebase != nil {
		r.add(*rebase)
	}
	for i, t := range b.TaskPlan.Tasks {
		if _, dup := r.index[t.ID]; dup {
			r.add(Action{Kind: KindIgnore, TaskID: t.ID, Reason: "duplicate task id on the board: only the first is read"})
			continue
		}
		r.index[t.ID] = i
	}
	r.claims(st)
	r.projects(st)
	r.tasks()
	sort.SliceStable(r.out, func(i, j int) bool {
		a, b := r.out[i], r.out[j]
		if kindRank[a.Kind] != kindRank[b.Kind] {
			return kindRank[a.Kind] < kindRank[b.Kind]
		}
		if a.ProjectID != b.ProjectID {
			return a.ProjectID < b.ProjectID
		}
		return a.TaskID < b.TaskID
	})
	return r.out, r.next
}

type reconciler struct {
	b     Board
	cfg   Config
	next  State
	index map[string]int
	out   []Action
}

// inProject reports whether the task belongs to a project entity on the
// board: such a task runs in its project's run, never on its own.
func (r *reconciler) inProject(t Task) bool {
	if t.ProjectID != "" {
		if _, ok := r.b.Project(t.ProjectID); ok {
			return true
		}
	}
	for _, p := range r.b.Projects {
		for _, id := range p.TaskIDs {
			if id == t.ID {
				return true
			}
		}
	}
	return false
}

func (r *reconciler) add(a Action) { r.out = append(r.out, a) }

func (r *reconciler) task(id string) (Task, bool) {
	i, ok := r.index[id]
	if !ok {
		return Task{}, false
	}
	return r.b.TaskPlan.Tasks[i], true
}

// claims follows the tasks already claimed: aborts, redispatches, and
// forgetting tasks karvi deleted.
func (r *reconciler) claims(st State) {
	for _, c := range st.Claims {
		wf := c.RunWorkflowID
		if wf == "" {
			wf = WorkflowID(c.TaskID)
		}
		t, ok := r.task(c.TaskID)
		if !ok {
			if c.Phase == PhaseRunning && !c.Aborted {
				r.add(Action{Kind: KindAbort, TaskID: c.TaskID, WorkflowID: wf, Key: c.Key, Reason: "task deleted from the board while it ran"})
			}
			r.forget(c.TaskID)
			continue
		}
		switch c.Phase {
		case PhaseRunning:
			if t.Status == StatusCancelled && !c.Aborted {
				c.Aborted = true
				r.add(Action{Kind: KindAbort, TaskID: c.TaskID, WorkflowID: wf, Key: c.Key, Reason: "cancelled on the board" + lastReason(t, StatusCancelled)})
			}
		case PhaseEnded:
			if past(t.Status, c.Final) {
				c.Settled = true
			}
			// Sent back by the board; a task routed elsewhere since is
			// no longer this runtime's to take again.
			if Routed(t, r.cfg) && (t.Status == StatusInProgress || t.Status == StatusDispatched) && (c.Settled || revised(t, c.Mark)) {
				c.Attempt++
				c.Phase = PhaseRunning
				c.Final, c.Settled, c.Aborted = "", false, false
				c.Mark = len(t.History)
				r.redispatch(t, &c, wf)
			}
		case PhaseRefused:
			// Sent back after the block (a user fixed the task and moved
			// it on): take it again as new.
			if Routed(t, r.cfg) && (t.Status == StatusDispatched || t.Status == StatusInProgress) && blockedSince(t, c.Mark) && !r.inProject(t) {
				c.Attempt++
				r.start(t, &c)
			}
		}
		r.next.put(c)
	}
}

func (r *reconciler) redispatch(t Task, c *Claim, wf string) {
	d, err := BuildDispatch(t, r.b, r.cfg)
	if err != nil {
		c.Phase, c.Reason = PhaseRefused, err.Error()
		r.add(Action{Kind: KindBlock, TaskID: t.ID, ProjectID: t.ProjectID, Attempt: c.Attempt, Reason: err.Error()})
		return
	}
	d.Mode = mapping.ModeRedispatch
	d.PlanID = planID(t.ID, c.Attempt)
	r.add(Action{Kind: KindRedispatch, TaskID: t.ID, WorkflowID: wf, Attempt: c.Attempt, Key: c.Key, Dispatch: &d, Reason: "sent back by the board" + lastReason(t, StatusNeedsRevision)})
}

// start claims a task on its own, as a new claim with a key of its own: a
// start, or a block when its plan is bad.
func (r *reconciler) start(t Task, c *Claim) {
	c.Key = r.next.newKey()
	c.Mark = len(t.History)
	c.Final, c.Settled, c.Aborted = "", false, false
	d, err := BuildDispatch(t, r.b, r.cfg)
	if err != nil {
		c.Phase, c.Reason = PhaseRefused, err.Error()
		r.add(Action{Kind: KindBlock, TaskID: t.ID, Attempt: c.Attempt, Reason: err.Error()})
		return
	}
	d.PlanID = planID(t.ID, c.Attempt)
	c.Phase, c.Reason = PhaseRunning, ""
	r.add(Action{Kind: KindStart, TaskID: t.ID, WorkflowID: WorkflowID(t.ID), Attempt: c.Attempt, Key: c.Key, Dispatch: &d})
}

func planID(taskID string, attempt int) string {
	if attempt <= 1 {
		return "intake-" + taskID
	}
	return "intake-" + taskID + "-" + strconv.Itoa(attempt)
}

func (r *reconciler) forget(taskID string) {
	out := r.next.Claims[:0]
	for _, c := range r.next.Claims {
		if c.TaskID != taskID {
			out = append(out, c)
		}
	}
	r.next.Claims = out
}

// tasks claims the tasks on their own (not in a project entity) that are
// ours, and notes board actions on tasks that are not.
func (r *reconciler) tasks() {
	for i, t := range r.b.TaskPlan.Tasks {
		if r.index[t.ID] != i {
			continue // a duplicate, noted
		}
		if _, claimed := r.next.Claim(t.ID); claimed {
			continue
		}
		if r.inProject(t) {
			continue // the project's run decides
		}
		if !Routed(t, r.cfg) {
			if boardAction(t.Status) {
				r.add(Action{Kind: KindIgnore, TaskID: t.ID, Reason: fmt.Sprintf("%s on a task routed to %q, not %q", t.Status, t.RuntimeHint, r.cfg.hint())})
			}
			continue
		}
		if !Ours(t, r.cfg) {
			if boardAction(t.Status) {
				r.add(Action{Kind: KindIgnore, TaskID: t.ID, Reason: t.Status + " on a task this runtime never claimed"})
			}
			continue
		}
		if r.b.agent(t.Assignee) && autoDispatch(r.b.Controls) {
			r.add(Action{Kind: KindIgnore, TaskID: t.ID, Reason: fmt.Sprintf("not claimed: assignee %q is a karvi agent and auto_dispatch is on, so karvi would run the task too; turn auto_dispatch off or assign the task to a participant that is not an agent", t.Assignee)})
			continue
		}
		c := Claim{TaskID: t.ID, Attempt: 1}
		r.start(t, &c)
		r.next.put(c)
	}
}

// projects turns projects whose tasks are all ours into runs and follows
// the runs already started.
func (r *reconciler) projects(st State) {
	present := map[string]bool{}
	ps := append([]Project(nil), r.b.Projects...)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
	for _, p := range ps {
		if p.ID == "" || present[p.ID] {
			continue
		}
		present[p.ID] = true
		if rc, ok := st.Run(p.ID); ok {
			r.followRun(p, rc)
			continue
		}
		if p.Status != ProjectExecuting && p.Status != ProjectPaused {
			continue
		}
		r.newRun(p)
	}
	// A project karvi no longer has: nothing more can come from it.
	kept := r.next.Runs[:0]
	for _, rc := range r.next.Runs {
		if present[rc.ProjectID] {
			kept = append(kept, rc)
		}
	}
	r.next.Runs = kept
}

// projectTasks is every board task of a project, in board order: those its
// taskIds list and those that name it.
func (r *reconciler) projectTasks(p Project) (tasks []Task, missing []string) {
	listed := map[string]bool{}
	for _, id := range p.TaskIDs {
		listed[id] = true
		if _, ok := r.task(id); !ok {
			missing = append(missing, id)
		}
	}
	for i, t := range r.b.TaskPlan.Tasks {
		if r.index[t.ID] == i && (listed[t.ID] || t.ProjectID == p.ID) {
			tasks = append(tasks, t)
		}
	}
	return tasks, missing
}

func (r *reconciler) newRun(p Project) {
	tasks, missing := r.projectTasks(p)
	var ours, foreign []string
	for _, t := range tasks {
		if Routed(t, r.cfg) {
			ours = append(ours, t.ID)
		} else {
			foreign = append(foreign, t.ID)
		}
	}
	if len(ours) == 0 {
		return // not ours at all
	}
	refuse := func(reason string) {
		r.next.putRun(RunClaim{ProjectID: p.ID, Refused: reason})
		r.add(Action{Kind: KindIgnore, ProjectID: p.ID, Reason: "project not run: " + reason})
		for _, t := range tasks {
			if _, claimed := r.next.Claim(t.ID); claimed || !Ours(t, r.cfg) {
				continue
			}
			r.next.put(Claim{TaskID: t.ID, Phase: PhaseRefused, Attempt: 1, Mark: len(t.History), Reason: reason, Key: r.next.newKey()})
			r.add(Action{Kind: KindBlock, TaskID: t.ID, ProjectID: p.ID, Attempt: 1, Reason: "project " + p.ID + " not run: " + reason})
		}
	}
	switch {
	case len(foreign) > 0:
		refuse(fmt.Sprintf("its tasks %s are routed to %q but %s are not; a run takes every task of its project", strings.Join(ours, ", "), r.cfg.hint(), strings.Join(foreign, ", ")))
		return
	case len(missing) > 0:
		refuse("taskIds lists tasks not on the board: " + strings.Join(missing, ", "))
		return
	}
	for _, t := range tasks {
		if c, claimed := r.next.Claim(t.ID); claimed {
			refuse(fmt.Sprintf("task %s is already claimed (%s)", t.ID, c.Phase))
			return
		}
		if t.Status != StatusPending && t.Status != StatusDispatched {
			refuse(fmt.Sprintf("task %s is already %s: someone else took it", t.ID, t.Status))
			return
		}
		if t.DecodeErr != "" {
			refuse("task " + t.ID + ": " + t.DecodeErr)
			return
		}
	}
	file, run, err := runFile(p, tasks)
	if err != nil {
		refuse(err.Error())
		return
	}
	rc := RunClaim{ProjectID: p.ID, WorkflowID: run.WorkflowID(), Paused: p.Status == ProjectPaused}
	for _, t := range tasks {
		rc.Tasks = append(rc.Tasks, t.ID)
		r.next.put(Claim{TaskID: t.ID, RunWorkflowID: rc.WorkflowID, Phase: PhaseRunning, Attempt: 1, Mark: len(t.History), Key: r.next.newKey()})
	}
	rc.Key = r.next.newKey()
	r.next.putRun(rc)
	r.add(Action{Kind: KindStartRun, ProjectID: p.ID, WorkflowID: rc.WorkflowID, RunFile: file, Paused: rc.Paused, Key: rc.Key})
}

func (r *reconciler) followRun(p Project, rc RunClaim) {
	if rc.Refused != "" {
		return // reported once when refused
	}
	switch {
	case p.Status == ProjectPaused && !rc.Paused:
		rc.Paused = true
		r.add(Action{Kind: KindPauseRun, ProjectID: p.ID, WorkflowID: rc.WorkflowID, Reason: "project paused on the board"})
	case p.Status == ProjectExecuting && rc.Paused:
		rc.Paused = false
		r.add(Action{Kind: KindResumeRun, ProjectID: p.ID, WorkflowID: rc.WorkflowID, Reason: "project resumed on the board"})
	}
	r.next.putRun(rc)
	tasks, _ := r.projectTasks(p)
	for _, t := range tasks {
		if _, claimed := r.next.Claim(t.ID); claimed || !Routed(t, r.cfg) {
			continue
		}
		reason := fmt.Sprintf("task %s joined project %s after its run %s started; a run's tasks are fixed when it starts, so post the task in a new project", t.ID, p.ID, rc.WorkflowID)
		r.next.put(Claim{TaskID: t.ID, Phase: PhaseRefused, Attempt: 1, Mark: len(t.History), Reason: reason, Key: r.next.newKey()})
		if Ours(t, r.cfg) {
			r.add(Action{Kind: KindBlock, TaskID: t.ID, ProjectID: p.ID, Attempt: 1, Reason: reason})
		} else {
			// Not dispatched: karvi allows no blocked from here, so only
			// the log says it.
			r.add(Action{Kind: KindIgnore, TaskID: t.ID, ProjectID: p.ID, Reason: reason})
		}
	}
}

// runFile writes a project as a run file and validates it with runplan.
func runFile(p Project, tasks []Task) (json.RawMessage, runplan.Run, error) {
	type taskJSON struct {
		ID          string          `json:"id"`
		Title       string          `json:"title"`
		Description string          `json:"description,omitempty"`
		Depends     []string        `json:"depends,omitempty"`
		Skill       string          `json:"skill,omitempty"`
		RuntimeHint string          `json:"runtimeHint,omitempty"`
		ModelHint   string          `json:"modelHint,omitempty"`
		Spec        string          `json:"spec,omitempty"`
		TargetRepo  string          `json:"target_repo,omitempty"`
		Estimate    json.RawMessage `json:"estimate,omitempty"`
		Scope       json.RawMessage `json:"scope,omitempty"`
	}
	f := struct {
		Slug              string          `json:"slug"`
		Title             string          `json:"title"`
		Repo              string          `json:"repo,omitempty"`
		Concurrency       *int            `json:"concurrency,omitempty"`
		CompletionTrigger json.RawMessage `json:"completionTrigger,omitempty"`
		Tasks             []taskJSON      `json:"tasks"`
	}{
		// The slug comes from the project id, which karvi makes unique,
		// so two projects with one title still make two runs.
		Slug:              runplan.DeriveSlug(p.ID),
		Title:             p.Title,
		Repo:              p.Repo,
		CompletionTrigger: p.CompletionTrigger,
	}
	if strings.TrimSpace(f.Title) == "" {
		f.Title = p.ID
	}
	if p.Concurrency != 0 {
		c := p.Concurrency
		f.Concurrency = &c
	}
	for _, t := range tasks {
		f.Tasks = append(f.Tasks, taskJSON{
			ID: t.ID, Title: t.Title, Description: t.Description, Depends: t.Depends,
			Skill: t.Skill, RuntimeHint: t.RuntimeHint, ModelHint: t.ModelHint, Spec: t.Spec,
			TargetRepo: t.TargetRepo, Estimate: t.Estimate, Scope: t.Scope,
		})
	}
	data, err := json.Marshal(f)
	if err != nil {
		return nil, runplan.Run{}, fmt.Errorf("run file: %w", err)
	}
	run, err := runplan.Parse(data)
	if err != nil {
		var re *runplan.Error
		if errors.As(err, &re) {
			return nil, runplan.Run{}, err
		}
		return nil, runplan.Run{}, fmt.Errorf("run file: %w", err)
	}
	return data, run, nil
}

// past reports whether status is final or a status karvi reaches only
// after it.
func past(status, final string) bool {
	switch final {
	case StatusCompleted:
		switch status {
		case StatusCompleted, StatusReviewing, StatusNeedsRevision, StatusApproved:
			return true
		}
	case StatusBlocked:
		return status == StatusBlocked
	}
	return false
}

// revised reports whether the history since mark shows the task sent back
// for revision: this runtime never writes needs_revision, karvi's review or
// a person does.
func revised(t Task, mark int) bool {
	for _, h := range since(t.History, mark) {
		if h.Status == StatusNeedsRevision {
			return true
		}
	}
	return false
}

// blockedSince reports whether the history since mark shows the task
// blocked and then moved on by someone.
func blockedSince(t Task, mark int) bool {
	h := since(t.History, mark)
	for i, e := range h {
		if e.Status == StatusBlocked {
			for _, later := range h[i+1:] {
				if later.Status == StatusDispatched || later.Status == StatusInProgress {
					return true
				}
			}
		}
	}
	return false
}

func since(h []HistoryEntry, mark int) []HistoryEntry {
	if mark < 0 || mark > len(h) {
		// karvi trimmed or rewrote the history: nothing after the mark
		// can be told apart.
		return nil
	}
	return h[mark:]
}

func lastReason(t Task, status string) string {
	for i := len(t.History) - 1; i >= 0; i-- {
		if h := t.History[i]; h.Status == status && strings.TrimSpace(h.Reason) != "" {
			return ": " + h.Reason
		}
	}
	return ""
}

// boardAction reports statuses a person (or karvi) sets to act on a task.
func boardAction(status string) bool {
	return status == StatusCancelled || status == StatusNeedsRevision
}

func autoDispatch(c Controls) bool {
	if c.AutoDispatch == nil {
		return defaultAutoDispatch
	}
	return *c.AutoDispatch
}
