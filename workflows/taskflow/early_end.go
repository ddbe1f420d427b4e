package taskflow

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// A run learns that a task completed from the task itself, in the same
// workflow task that schedules the final status write, instead of from the
// task workflow's close one activity and one workflow task later: the
// dependents start that much sooner. Only a completion is told early. An
// attempt that ends otherwise may loop, and the next attempt's workflow
// starts under the same id, which needs the last one closed.

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
	return workflow.SignalExternalWorkflow(r.ctx, parent.ID, "", taskapi.SignalTaskEnded, taskapi.TaskEndedOf(r.st.Dispatch.TaskID, a.N, res))
}
