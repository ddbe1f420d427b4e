package runflow

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/flowkit"
)

// maxDetailRows bounds the task table in the Web UI's current details; the
// view query and status.json hold every task.
const maxDetailRows = 60

// showDetails keeps the Web UI's current details (written with Sprintf:
// workflowcheck cannot see where Fprintf's writer goes): the run's state and its
// task table, the tasks that need a person first.
func (r *runFlow) showDetails() {
	doc := &r.st.Doc
	var b strings.Builder
	done, total := 0, len(r.run.Tasks)
	counts := map[runstatus.TaskState]int{}
	for _, rt := range r.run.Tasks {
		s := doc.Tasks[rt.ID].Status
		counts[s]++
		if s == runstatus.TaskDone || s == runstatus.TaskSkipped {
			done++
		}
	}
	b.WriteString(fmt.Sprintf("**Run %s: %s**, %d of %d tasks done, %d running (concurrency %d), updated %s UTC\n\n",
		r.run.Slug, doc.Status, done, total, r.running(), r.run.Concurrency, flowkit.Clock(workflow.Now(r.ctx))))
	if r.st.AbortReason != "" {
		b.WriteString("Aborted: " + r.st.AbortReason + "\n\n")
	}
	b.WriteString(budgetPauseDetails(r))
	b.WriteString("| task | status | model | loops | attempt | cost | note |\n|---|---|---|---|---|---|---|\n")
	rows := 0
	for _, pass := range []func(runstatus.TaskState) bool{needsPerson, func(s runstatus.TaskState) bool { return !needsPerson(s) }} {
		for _, rt := range r.run.Tasks {
			dt, t := doc.Tasks[rt.ID], r.st.Tasks[rt.ID]
			if !pass(dt.Status) {
				continue
			}
			if rows == maxDetailRows {
				b.WriteString(fmt.Sprintf("| … | %d more tasks: `starter run status %s` |  |  |  |  |  |\n", total-rows, r.run.Slug))
				r.setDetails(b.String())
				return
			}
			rows++
			note := t.LastError
			switch {
			case len(dt.BlockedBy) > 0:
				note = "blocked by " + strings.Join(dt.BlockedBy, ", ")
			case len(dt.ConflictFiles) > 0:
				note = "conflict in " + strings.Join(dt.ConflictFiles, ", ")
			}
			b.WriteString(fmt.Sprintf("| %s | %s | %s | %d | %d | $%.2f | %s |\n", rt.ID, dt.Status, dt.Model,
				dt.LoopCount, t.Attempt, t.CostUSD, strings.ReplaceAll(taskapi.ClipLine(note, 120), "|", "\\|")))
		}
	}
	r.setDetails(b.String())
}

// budgetPauseDetails says that a run paused for its budget waits for a
// person, and how to go on; nothing for another run.
func budgetPauseDetails(r *runFlow) string {
	if r.st.Doc.PausedReason != runstatus.PausedBudget {
		return ""
	}
	return "Paused for its budget, waiting for a person: " + r.st.BudgetNote + "\n\n"
}

func (r *runFlow) setDetails(s string) {
	workflow.SetCurrentDetails(r.ctx, s)
}

func needsPerson(s runstatus.TaskState) bool {
	switch s {
	case runstatus.TaskFailed, runstatus.TaskBlocked, runstatus.TaskPaused, runstatus.TaskNeedsHumanRebase:
		return true
	}
	return false
}
