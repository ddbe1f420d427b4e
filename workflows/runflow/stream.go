package runflow

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/mapping/redact"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/flowkit"
)

// A run's canonical stream (canonical.RunIDForRun) holds the run's own
// states and every change of state of its tasks: queued, started, blocked,
// done, failed, skipped, in conflict. The steps are found by comparing the
// document with what was last reported, each time status.json is written,
// and travel in that same local activity: the stream costs the run no
// history of its own. Each task's own stream (its attempts, its conductor's
// events) is the task workflow's.

// RunStreamState is the stream's part of the run's state.
type RunStreamState struct {
	Source string `json:"source"`
	Seq    int    `json:"seq"`
	// Reported is each task's state ("" key: the run's) as last reported.
	Reported map[string]string `json:"reported"`
	// States is each task's canonical state as last reported; a task
	// missing here (a state from before it existed) is taken from
	// Reported.
	States map[string]canonical.State `json:"states,omitempty"`
}

// taskState is a task's canonical state as last reported.
func (st *RunStreamState) taskState(id string) canonical.State {
	if s, ok := st.States[id]; ok {
		return s
	}
	return canonical.RunTaskState(st.Reported[id])
}

// runSteps compares the document with what was last reported and makes the
// events of every change, the run's first, then the tasks' in run file
// order.
func (r *runFlow) runSteps() []canonical.Event {
	st := r.st.Stream
	if st == nil {
		info := workflow.GetInfo(r.ctx)
		st = &RunStreamState{Source: canonical.StepSource(info.Namespace, info.WorkflowExecution.ID, info.FirstRunID),
			Reported: map[string]string{}}
		r.st.Stream = st
	}
	now := workflow.Now(r.ctx)
	ctx := canonical.StepContext{RunID: canonical.RunIDForRun(r.run.Slug), TaskID: r.run.Slug, Source: st.Source}
	var evs []canonical.Event
	emit := func(s canonical.RunStep) {
		st.Seq++
		s.Seq, s.TS = st.Seq, now
		s.Reason, s.Title = redact.String(s.Reason), redact.String(s.Title)
		if s.Task != "" {
			s.Prev = st.taskState(s.Task)
		}
		ev := canonical.FromRunStep(s, ctx)
		evs = append(evs, ev)
		st.Reported[s.Task] = s.To
		if s.Task != "" {
			if st.States == nil {
				st.States = map[string]canonical.State{}
			}
			st.States[s.Task] = ev.State
		}
	}
	doc := &r.st.Doc
	runStep := func() {
		run := string(doc.Status)
		if st.Reported[""] == run {
			return
		}
		s := canonical.RunStep{From: st.Reported[""], To: run, Reason: r.st.AbortReason}
		if doc.Summary != nil {
			s.Reason = flowkit.FirstNonBlank(r.st.AbortReason, fmt.Sprintf("%d of %d tasks done, %d failed, %d skipped",
				doc.Summary.Successful, doc.Summary.TotalTasks, doc.Summary.Failed, doc.Summary.Skipped))
		}
		if run == string(runstatus.RunActive) && st.Reported[""] == "" {
			s.Title = r.run.Title
		}
		emit(s)
	}
	// The run's own change comes first, unless it ended: then its tasks'
	// last changes come before its end.
	ended := doc.Status == runstatus.RunComplete || doc.Status == runstatus.RunPartial
	if !ended {
		runStep()
	}
	for _, rt := range r.run.Tasks {
		dt := doc.Tasks[rt.ID]
		if st.Reported[rt.ID] == string(dt.Status) {
			continue
		}
		s := canonical.RunStep{Task: rt.ID, Title: rt.Title, From: st.Reported[rt.ID], To: string(dt.Status),
			Model: dt.Model, Attempt: r.st.Tasks[rt.ID].Attempt, Loops: dt.LoopCount}
		switch {
		case len(dt.BlockedBy) > 0:
			s.Reason = "blocked by " + strings.Join(dt.BlockedBy, ", ")
		case len(dt.ConflictFiles) > 0:
			s.Reason = "merge conflicts in " + strings.Join(dt.ConflictFiles, ", ")
		case dt.PausedReason != "":
			s.Reason = string(dt.PausedReason)
		default:
			s.Reason = dt.Error
		}
		emit(s)
	}
	if note := r.st.BudgetNote; note != "" && st.Reported["budget"] != note {
		st.Seq++
		ev := canonical.FromRunStep(canonical.RunStep{Seq: st.Seq, TS: now, To: "budget", Reason: note}, ctx)
		evs = append(evs, ev)
		st.Reported["budget"] = note
	}
	if ended {
		runStep()
	}
	return evs
}
