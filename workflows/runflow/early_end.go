package runflow

import (
	"karvi-edda-temporal/api/task"
)

// A task tells its run that it completed before its workflow closes
// (the task wing sends taskapi.SignalTaskEnded); the run takes it here.

// listenForEnds takes the completions tasks tell early into the inbox.
func (r *runFlow) listenForEnds() {
	listen(r, taskapi.SignalTaskEnded, func(s taskapi.TaskEnded) {
		r.inbox = append(r.inbox, taskEnd{
			ID: s.Task, Attempt: s.Attempt, Reached: max(s.Attempt, s.Reached), Completed: true, Early: true,
			Summary: s.Summary, CostUSD: s.CostUSD, ByPhase: s.ByPhase, Model: s.Model, Skill: s.Skill,
		})
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
