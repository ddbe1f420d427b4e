package taskact

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/mapping"
)

// PrepareRequest asks for the plan of one attempt of a task.
type PrepareRequest struct {
	Dispatch mapping.DispatchPlan `json:"dispatch"`
	Attempt  int                  `json:"attempt"`
	// Nonce tells the attempts of the asking workflow chain from those of
	// every other workflow of the task (mapping.AttemptNonce); the plan is
	// named mapping.AttemptPlanName(task, attempt, nonce). Empty for the
	// workflows that began before attempts carried one.
	Nonce string `json:"nonce,omitempty"`
}

// PlanInfo is what the workflow keeps about a generated plan: where things
// live on disk and the plan's shape. The plan text itself stays on disk.
type PlanInfo struct {
	Summary    mapping.PlanSummary `json:"summary"`
	PlanPath   string              `json:"planPath"`
	Cwd        string              `json:"cwd"`
	RunDir     string              `json:"runDir"`
	EventsPath string              `json:"eventsPath"`
	StatePath  string              `json:"statePath"`
}

// PreparePlan builds the plan.yaml of one attempt and writes it under the
// work root. It is idempotent: the same request writes the same file.
func (a *Activities) PreparePlan(ctx context.Context, req PrepareRequest) (PlanInfo, error) {
	d := req.Dispatch
	if err := d.Validate(); err != nil {
		return PlanInfo{}, activities.InvalidDispatch(err)
	}
	tmpl, err := a.Config.Templates.Select(d)
	if err != nil {
		return PlanInfo{}, activities.InvalidDispatch(err)
	}
	plan, err := mapping.BuildAttemptPlan(d, req.Attempt, req.Nonce, tmpl)
	if err != nil {
		return PlanInfo{}, activities.InvalidDispatch(err)
	}
	data, err := mapping.MarshalPlan(plan)
	if err != nil {
		return PlanInfo{}, activities.InvalidDispatch(err)
	}
	layout, err := activities.NewLayout(a.Config.WorkRoot)
	if err != nil {
		return PlanInfo{}, err
	}
	cwd, err := layout.TaskCwd(d)
	if err != nil {
		return PlanInfo{}, activities.InvalidDispatch(err)
	}
	runDir, err := layout.RunDir(d.TaskID, plan.Name)
	if err != nil {
		return PlanInfo{}, activities.InvalidDispatch(err)
	}
	for _, dir := range []string{cwd, runDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return PlanInfo{}, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	planPath := filepath.Join(runDir, "plan.yaml")
	if err := activities.WriteFileAtomic(planPath, data); err != nil {
		return PlanInfo{}, err
	}
	stateDir := filepath.Join(cwd, ".edda", "conductor", plan.Name)
	return PlanInfo{
		Summary:    plan.Summary(),
		PlanPath:   planPath,
		Cwd:        cwd,
		RunDir:     runDir,
		EventsPath: filepath.Join(stateDir, "events.jsonl"),
		StatePath:  filepath.Join(stateDir, "state.json"),
	}, nil
}
