package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows/runapi"
)

// A run learns that a task completed from the task itself, in the same
// workflow task that schedules the final status write, instead of from the
// task workflow's close one activity and one workflow task later: the
// dependents start that much sooner. Only a completion is told early. An
// attempt that ends otherwise may loop, and the next attempt's workflow
// starts under the same id, which needs the last one closed.

// versionEarlyEnd names the change that signals the run when an attempt
// completed, before the final status write.
const versionEarlyEnd = "run-early-end"

// tellRunEnded signals the parent run that the attempt completed, when the
// task is a run's and no redispatch is pending (that would start another
// attempt after the status write). It returns the signal's future, or nil
// when nothing was sent.
func (r *taskRun) tellRunEnded(o mapping.Outcome, ended string) workflow.Future {
	parent := workflow.GetInfo(r.ctx).ParentWorkflowExecution
	if parent == nil || o.TaskStatus != mapping.TaskCompleted || r.st.Signals.PendingRedispatch {
		return nil
	}
	if workflow.GetVersion(r.ctx, versionEarlyEnd, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	a := r.st.Current
	res := r.result()
	res.Attempts = append(slices.Clone(r.st.Finished), a.summary(ended, o.LastError, workflow.Now(r.ctx)))
	e := endOfResult(r.st.Dispatch.TaskID, a.N, res)
	return workflow.SignalExternalWorkflow(r.ctx, parent.ID, "", runapi.SignalTaskEnded, runapi.TaskEnded{
		Task: e.ID, Attempt: e.Attempt, Reached: e.Reached, Summary: e.Summary, CostUSD: e.CostUSD,
		ByPhase: e.ByPhase, Model: e.Model, Skill: e.Skill,
	})
}

// listenForEnds takes the completions tasks tell early into the inbox.
func (r *runFlow) listenForEnds() {
	ch := workflow.GetSignalChannel(r.ctx, runapi.SignalTaskEnded)
	workflow.Go(r.ctx, func(gctx workflow.Context) {
		for {
			var s runapi.TaskEnded
			ch.Receive(gctx, &s)
			r.inbox = append(r.inbox, taskEnd{
				ID: s.Task, Attempt: s.Attempt, Reached: max(s.Attempt, s.Reached), Completed: true, Early: true,
				Summary: s.Summary, CostUSD: s.CostUSD, ByPhase: s.ByPhase, Model: s.Model, Skill: s.Skill,
			})
		}
	})
}

// noteClosing follows the task workflows told early that are still
// closing: the run ends only once they closed, so a run never reports its
// end while a task of it still writes its status. A continue-as-new does
// not wait for them (a busy run always has some closing); the next run
// knows them as done.
func (r *runFlow) noteClosing(e taskEnd, applied bool) {
	if e.Early {
		if applied {
			if r.closing == nil {
				r.closing = map[string]int{}
			}
			r.closing[e.ID] = e.Attempt
		}
		return
	}
	if a, ok := r.closing[e.ID]; ok && a == e.Attempt {
		delete(r.closing, e.ID)
	}
}
