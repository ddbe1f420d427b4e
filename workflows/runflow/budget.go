package runflow

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/workflows/runflow/runapi"
	"karvi-edda-temporal/workflows/taskflow/taskapi"
)

// A run's budget covers what all its tasks spend: the attempts that ended
// (their results say) and the attempts under way (each reports its spending
// at its checkpoints, by signal, when the run has a budget). At 80 % the run
// notes a warning once, on itself and on the brief of every task running;
// at 100 % a `block` budget stops the run as an abort does, every running
// task aborted with "Budget exceeded ($X spent of $Y)", and no task starts
// again; a `warn` budget notes that too and goes on.

// listenForSpend registers the handler of the tasks' spending reports.
func (r *runFlow) listenForSpend() {
	ch := workflow.GetSignalChannel(r.ctx, taskapi.SignalTaskSpend)
	workflow.Go(r.ctx, func(gctx workflow.Context) {
		for {
			var s taskapi.TaskSpend
			ch.Receive(gctx, &s)
			t := r.st.Tasks[s.Task]
			if t == nil || !t.Running || t.Attempt != s.Attempt || s.CostUSD <= t.Spend {
				continue // a late report, or nothing new
			}
			t.Spend = s.CostUSD
			r.wake = true
		}
	})
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
		r.st.BudgetNote += " (budget action warn: the run goes on)"
	}
	r.log.Warn("run budget", "run", r.run.Slug, "note", r.st.BudgetNote)
	r.noteRunningTasks("budget", r.st.BudgetNote)
	return false
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
	if b.Action == costs.Pause {
		return fmt.Errorf("run: budget: action: %q is for a task's budget; a run's is %q or %q", b.Action, costs.Warn, costs.Block)
	}
	return nil
}
