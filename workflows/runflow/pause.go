package runflow

import (
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/taskflow/taskapi"
)

// listenForPauses registers the handler of the tasks' pause reports: a
// task paused on a usage limit shows as paused (paused_reason usage_limit)
// in the run's status until it reports that it runs again; its dependents
// wait meanwhile, as for any task not done.
func (r *runFlow) listenForPauses() {
	ch := workflow.GetSignalChannel(r.ctx, taskapi.SignalTaskPause)
	workflow.Go(r.ctx, func(gctx workflow.Context) {
		for {
			var p taskapi.TaskPause
			ch.Receive(gctx, &p)
			t := r.st.Tasks[p.Task]
			if t == nil || !t.Running || t.Attempt != p.Attempt {
				continue // a late report
			}
			var err error
			if p.Paused {
				err = r.st.Doc.PauseTask(p.Task, runstatus.PausedReason(p.Reason), p.At)
			} else {
				err = r.st.Doc.ResumeTask(p.Task)
			}
			if err != nil {
				workflow.GetLogger(gctx).Warn("task pause not recorded", "task", p.Task, "error", err)
				continue
			}
			r.changed()
			r.wake = true
		}
	})
}
