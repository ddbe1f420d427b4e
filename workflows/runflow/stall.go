package runflow

import (
	"karvi-edda-temporal/api/task"
)

// listenForStalls registers the handler of the tasks' stall reports: a
// running task whose phase shows no progress is marked stalled in the
// run's status (`starter run status` warns of it) until it reports
// progress again. A stall changes nothing else of the run.
func (r *runFlow) listenForStalls() {
	listen(r, taskapi.SignalTaskStall, r.taskStalled)
}

func (r *runFlow) taskStalled(s taskapi.TaskStall) {
	t := r.st.Tasks[s.Task]
	if t == nil || !t.Running || t.Attempt != s.Attempt {
		return // a late report
	}
	var err error
	if s.Stalled {
		err = r.st.Doc.StallTask(s.Task, s.Phase, s.At)
	} else {
		err = r.st.Doc.UnstallTask(s.Task)
	}
	if err != nil {
		r.log.Warn("task stall not recorded", "task", s.Task, "error", err)
		return
	}
	r.changed()
	if r.signalsBuffered {
		// Written to status.json now, not at the next change of
		// another kind.
		r.wake = true
	}
}
