package runapi

import (
	"fmt"
	"strings"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows/taskflow/taskapi"
)

// TaskEndedOf is what a task workflow's result tells its run: the payload
// of SignalTaskEnded, and the part of a task's end the run reads from its
// result when the workflow closes.
func TaskEndedOf(id string, attempt int, res taskapi.Result) TaskEnded {
	e := TaskEnded{Task: id, Attempt: attempt, Reached: max(attempt, res.Attempt), Summary: briefSummary(res.Brief),
		ByPhase: res.Brief.Cost.ByPhase, Skill: res.Dispatch.Skill}
	if m := res.Dispatch.ModelHint; m != nil {
		e.Model = *m
	}
	for _, a := range res.Attempts {
		if a.CostUSD != nil {
			e.CostUSD += *a.CostUSD
		}
	}
	return e
}

// briefSummary is the line a dependent task gets about an upstream one:
// how far its plan went, what it cost, and the last thing it logged.
func briefSummary(b mapping.Brief) string {
	var parts []string
	if b.Plan.TotalPhases > 0 {
		parts = append(parts, fmt.Sprintf("%d/%d phases completed", b.CompletedPhases, b.Plan.TotalPhases))
	}
	if b.Cost.TotalUSD != nil {
		parts = append(parts, fmt.Sprintf("cost $%.2f", *b.Cost.TotalUSD))
	}
	if n := len(b.Log); n > 0 {
		last := b.Log[n-1]
		parts = append(parts, strings.TrimSpace(last.Action+" "+last.Detail))
	}
	return taskapi.ClipLine(strings.Join(parts, "; "), 300)
}
