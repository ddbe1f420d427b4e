//go:build realserver

package testrig

import (
	"os"
	"path/filepath"

	"karvi-edda-temporal/mapping"
)

// PlanName is the plan name of a task's attempt under the rig's work root:
// the newest run directory of that attempt number, whichever workflow
// chain made it (its name carries the chain's nonce), or the name without
// a nonce while none exists yet.
func (r *Rig) PlanName(taskID string, attempt int) string {
	return PlanIn(r.WorkRoot, taskID, attempt)
}

// PlanIn is PlanName for a work root.
func PlanIn(workRoot, taskID string, attempt int) string {
	best, newest := mapping.PlanName(taskID, attempt), int64(-1)
	entries, _ := os.ReadDir(filepath.Join(workRoot, "runs", taskID))
	for _, e := range entries {
		if !e.IsDir() || !mapping.IsAttemptPlan(e.Name(), taskID, attempt) {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().UnixNano() > newest {
			best, newest = e.Name(), info.ModTime().UnixNano()
		}
	}
	return best
}

// Plans lists the run directories (plan names) of a task under the work
// root: one per conductor start.
func (r *Rig) Plans(taskID string) []string {
	entries, _ := os.ReadDir(filepath.Join(r.WorkRoot, "runs", taskID))
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}
