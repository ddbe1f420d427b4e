package runflow

import (
	"karvi-edda-temporal/workflows/taskflow/taskapi"

	"go.temporal.io/sdk/workflow"
)

// listenForStalls registers the handler of the tasks' stall reports: a
// running task whose phase shows no progress is marked stalled in the
// run's status (`starter run status` warns of it) until it reports
// progress again. A stall changes nothing else of the run.
func (r *runFlow) listenForStalls() {
	ch := workflow.GetSignalChannel(r.ctx, taskapi.SignalTaskStall)
	workflow.Go(r.ctx, func(gctx workflow.Context) {
		for {
			var s taskapi.TaskStall
			ch.Receive(gctx, &s)
			t := r.st.Tasks[s.Task]
			if t == nil || !t.Running || t.Attempt != s.Attempt {
				continue // a late report
			}
			var err error
			if s.Stalled {
				err = r.st.Doc.StallTask(s.Task, s.Phase, s.At)
			} else {
				err = r.st.Doc.UnstallTask(s.Task)
			}
			if err != nil {
				workflow.GetLogger(gctx).Warn("task stall not recorded", "task", s.Task, "error", err)
				continue
			}
			r.changed()
		}
	})
}
