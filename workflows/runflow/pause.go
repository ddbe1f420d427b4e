package runflow

import (
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/runstatus"
)

// listenForPauses registers the handler of the tasks' pause reports: a
// task paused on a usage limit shows as paused (paused_reason usage_limit)
// in the run's status until it reports that it runs again; its dependents
// wait meanwhile, as for any task not done.
func (r *runFlow) listenForPauses() {
	listen(r, taskapi.SignalTaskPause, r.taskPaused)
}

func (r *runFlow) taskPaused(p taskapi.TaskPause) {
	t := r.st.Tasks[p.Task]
	if t == nil || !t.Running || t.Attempt != p.Attempt {
		return // a late report
	}
	var err error
	if p.Paused {
		err = r.st.Doc.PauseTask(p.Task, runstatus.PausedReason(p.Reason), p.At)
	} else {
		err = r.st.Doc.ResumeTask(p.Task)
	}
	if err != nil {
		r.log.Warn("task pause not recorded", "task", p.Task, "error", err)
		return
	}
	r.changed()
	r.wake = true
}
