package runflow

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/flowkit"
)

// A run's budget covers what all its tasks spend: the attempts that ended
// (their results say) and the attempts under way (each reports its spending
// at its checkpoints, by signal, when the run has a budget). At 80 % the run
// notes a warning once, on itself and on the brief of every task running;
// at 100 % a `block` budget stops the run as an abort does, every running
// task aborted with "Budget exceeded ($X spent of $Y)", and no task starts
// again; a `warn` budget notes that too and goes on; a `pause` budget
// pauses the run as a person's pause does (paused_reason budget): no task
// starts, the running ones go on to their end, until a person raises the
// budget (UpdateBudget) or resumes the run. A resume acknowledges what was
// spent so far: the run pauses again once its tasks spend more than that.

// listenForSpend registers the handler of the tasks' spending reports.
func (r *runFlow) listenForSpend() {
	listen(r, taskapi.SignalTaskSpend, r.taskSpent)
}

func (r *runFlow) taskSpent(s taskapi.TaskSpend) {
	t := r.st.Tasks[s.Task]
	if t == nil || !t.Running || t.Attempt != s.Attempt || s.CostUSD <= t.Spend {
		return // a late report, or nothing new
	}
	t.Spend = s.CostUSD
	r.wake = true
}

// spent is what the run's tasks spent, the attempts under way included.
func (r *runFlow) spent() (ended, running float64) {
	ended = r.st.Spent.TotalUSD
	for _, rt := range r.run.Tasks {
		t := r.st.Tasks[rt.ID]
		if t.Running {
			running += t.Spend
		}
	}
	return ended, running
}

// checkBudget acts on the budget's level; it returns true when the run
// must stop.
func (r *runFlow) checkBudget() bool {
	b := r.in.Budget
	if b == nil {
		return false
	}
	ended, running := r.spent()
	total := ended + running
	level := b.Level(total)
	if level == costs.Spent && r.st.BudgetLevel == costs.Spent && b.Action == costs.Pause && spentPast(total, r.st.BudgetAck) {
		// Spent again since a person acknowledged the spend, or the
		// run was paused by a person when the budget was spent.
		r.pauseForBudget(total)
		return false
	}
	if level <= r.st.BudgetLevel {
		return false
	}
	r.st.BudgetLevel = level
	r.changed()
	switch level {
	case costs.Warning:
		r.st.BudgetNote = b.WarningMessage(total)
	case costs.Spent:
		r.st.BudgetNote = b.ExceededMessage(total)
		if b.Action == costs.Block {
			r.log.Warn("run budget spent: stopping the run", "run", r.run.Slug, "spent", total, "limit", b.LimitUSD)
			r.st.Aborting, r.st.AbortReason = true, r.st.BudgetNote
			return true
		}
		if b.Action == costs.Pause {
			r.pauseForBudget(total)
			return false
		}
		r.st.BudgetNote += " (budget action warn: the run goes on)"
	}
	r.log.Warn("run budget", "run", r.run.Slug, "note", r.st.BudgetNote)
	r.noteRunningTasks("budget", r.st.BudgetNote)
	return false
}

// spentPast: total is more than the acknowledged spending, by more than
// the rounding of adding the same costs up in another order (an attempt's
// reports and its end).
func spentPast(total, acknowledged float64) bool {
	return total > acknowledged+1e-9
}

// pauseForBudget pauses an active run for its spent budget and tells it on
// the run and on the brief of every task running. A run a person paused
// stays paused for them; it pauses for the budget once they resume it.
func (r *runFlow) pauseForBudget(total float64) {
	if r.st.Doc.Status != runstatus.RunActive {
		return
	}
	v := workflow.GetVersion(r.ctx, versionBudgetPause, workflow.DefaultVersion, 2)
	if v == workflow.DefaultVersion {
		return
	}
	if err := r.st.Doc.PauseFor(runstatus.PausedBudget, workflow.Now(r.ctx)); err != nil {
		r.log.Error("budget pause not recorded", "run", r.run.Slug, "error", err)
		return
	}
	r.changed()
	slug := r.run.Slug
	r.st.BudgetNote = r.in.Budget.ExceededMessage(total) + fmt.Sprintf(" (budget action pause: the run starts no new task and waits for a person: "+
		"`starter run budget set %s -budget N` raises its budget, `starter run resume %s` goes on past it)", slug, slug)
	r.log.Warn("run budget spent: the run pauses", "run", slug, "spent", total, "limit", r.in.Budget.LimitUSD)
	r.noteRunningTasks("budget", r.st.BudgetNote)
	if v >= 2 {
		now := workflow.Now(r.ctx).UTC()
		flowkit.QueueNotification(r.ctx, taskapi.NotifyRequest{
			// One id a pause: the pause's time, the same on every replay.
			ID:   fmt.Sprintf("%s-run_paused-%d", workflow.GetInfo(r.ctx).WorkflowExecution.ID, now.UnixNano()),
			Kind: "paused", Time: now, RunID: slug, Reason: r.st.BudgetNote,
			Details: map[string]string{"paused_reason": string(runstatus.PausedBudget),
				"spent_usd": fmt.Sprintf("%.2f", total), "limit_usd": fmt.Sprintf("%.2f", r.in.Budget.LimitUSD)},
		})
	}
}

// resume ends the run's pause; the end of a pause for the budget
// acknowledges what was spent so far.
func (r *runFlow) resume() error {
	forBudget := r.st.Doc.PausedReason == runstatus.PausedBudget
	if err := r.apply(func(s *runstatus.Status) error { return s.Resume() }); err != nil {
		return err
	}
	if forBudget {
		ended, running := r.spent()
		r.st.BudgetAck = ended + running
		r.st.BudgetNote += fmt.Sprintf(" Resumed by a person: $%.2f spent acknowledged; the run pauses again once its tasks spend more.", r.st.BudgetAck)
	}
	return nil
}

// setBudget sets the run's budget (apply false: only checks the request).
// Its level is taken afresh, so a warning or the action comes again when
// the new budget is reached; a run paused for its budget starts tasks
// again once the new one is not spent (or no longer pauses).
func (r *runFlow) setBudget(req runapi.BudgetRequest, apply bool) error {
	if err := r.checkOpen("set the budget of"); err != nil {
		return err
	}
	if r.in.Budget == nil {
		return fmt.Errorf("run %s has no budget: start it with one (-budget) to set it", r.run.Slug)
	}
	b := costs.Budget{LimitUSD: req.LimitUSD, Action: req.Action}
	if b.Action == "" {
		b.Action = r.in.Budget.Action
	}
	if err := budgetError(&b); err != nil {
		return fmt.Errorf("run %s: %w", r.run.Slug, errors.Unwrap(err))
	}
	if !apply {
		return nil
	}
	r.in.Budget = &b
	ended, running := r.spent()
	total := ended + running
	level := b.Level(total)
	r.st.BudgetLevel = min(r.st.BudgetLevel, level)
	if level == costs.Spent && b.Action != costs.Pause {
		r.st.BudgetLevel = costs.Warning // the new action acts at once
	}
	r.st.BudgetAck = 0
	r.st.BudgetNote = fmt.Sprintf("Budget set to $%.2f (%s at 100 %%): $%.2f spent", b.LimitUSD, b.Action, total)
	if r.st.Doc.PausedReason == runstatus.PausedBudget && (level < costs.Spent || b.Action != costs.Pause) {
		if err := r.st.Doc.Resume(); err != nil {
			return err
		}
		r.st.BudgetNote += "; the run goes on"
	} else if r.st.Doc.PausedReason == runstatus.PausedBudget {
		r.st.BudgetNote += "; still spent: the run stays paused"
		r.st.BudgetAck = total
	}
	r.log.Info("run budget set", "run", r.run.Slug, "limit", b.LimitUSD, "action", b.Action, "spent", total)
	r.changed()
	r.wake = true
	return nil
}

// noteRunningTasks adds a note to the brief of every task running.
func (r *runFlow) noteRunningTasks(action, detail string) {
	for _, rt := range r.run.Tasks {
		if t := r.st.Tasks[rt.ID]; t.Running {
			f := workflow.SignalExternalWorkflow(r.ctx, runapi.TaskWorkflowID(rt.ID), "", taskapi.SignalNote, taskapi.NoteSignal{Action: action, Detail: detail})
			if err := f.Get(r.ctx, nil); err != nil {
				r.log.Warn("note not delivered to a task", "task", rt.ID, "error", err)
			}
		}
	}
}

// addSpend adds an ended attempt's spending to the run's.
func (r *runFlow) addSpend(e taskEnd) {
	err := r.st.Spent.Add(costs.Spend{Task: e.ID, Model: e.Model, Skill: e.Skill, ByPhase: e.ByPhase, TotalUSD: e.CostUSD})
	if err != nil {
		r.log.Warn("spending not counted", "task", e.ID, "error", err)
	}
}

func (r *runFlow) cost() runapi.Cost {
	ended, running := r.spent()
	c := runapi.Cost{Summary: r.st.Spent, RunningUSD: running, SpentUSD: ended + running, Budget: r.in.Budget}
	if r.in.Budget != nil {
		c.Level = r.in.Budget.Level(c.SpentUSD).String()
	}
	return c
}

// abortDocument ends the document of an aborted run: the tasks it stopped
// read the budget's message when the budget stopped it, else "run aborted".
func (r *runFlow) abortDocument() error {
	at := workflow.Now(r.ctx)
	if r.st.BudgetLevel == costs.Spent && r.in.Budget != nil && r.in.Budget.Action == costs.Block {
		return r.st.Doc.AbortWith(r.st.AbortReason, at)
	}
	return r.st.Doc.Abort(at)
}

// budgetError names a bad budget in the run's input.
func budgetError(b *costs.Budget) error {
	if b == nil {
		return nil
	}
	if err := b.Validate(); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}
