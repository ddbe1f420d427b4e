package runflow

import (
	"fmt"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/flowkit"
	"sort"
	"strconv"
	"strings"

	"go.temporal.io/sdk/workflow"
)

// notifyEnded tells that the run ended, with its tasks counted by state
// and those that need a person named.
func (r *runFlow) notifyEnded() {
	if !flowkit.NotifyOn(r.ctx) {
		return
	}
	doc := &r.st.Doc
	counts := map[runstatus.TaskState]int{}
	var states []runstatus.TaskState // in the order first seen
	var failed []string
	for _, rt := range r.run.Tasks {
		s := doc.Tasks[rt.ID].Status
		if counts[s] == 0 {
			states = append(states, s)
		}
		counts[s]++
		if needsPerson(s) {
			failed = append(failed, rt.ID)
		}
	}
	details := map[string]string{"status": string(doc.Status), "tasks": strconv.Itoa(len(r.run.Tasks))}
	var parts []string
	for _, s := range states {
		details[string(s)] = strconv.Itoa(counts[s])
		parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
	}
	sort.Strings(parts)
	if len(failed) > 0 {
		details["need_a_person"] = strings.Join(clipList(failed, 20), ", ")
	}
	if r.st.AbortReason != "" {
		details["abort_reason"] = r.st.AbortReason
	}
	info := workflow.GetInfo(r.ctx)
	flowkit.QueueNotification(r.ctx, taskapi.NotifyRequest{
		ID:   fmt.Sprintf("%s-run_ended-%s", info.WorkflowExecution.ID, info.WorkflowExecution.RunID),
		Kind: "run_ended", Time: workflow.Now(r.ctx).UTC(), RunID: r.run.Slug,
		Reason:  fmt.Sprintf("run %s ended %s: %s", r.run.Slug, doc.Status, strings.Join(parts, ", ")),
		Details: details,
	})
}

// clipList keeps at most n items, saying how many more there were.
func clipList(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(append([]string(nil), items[:n]...), fmt.Sprintf("%d more", len(items)-n))
}
