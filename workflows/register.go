package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/workflows/intentapi"
	"karvi-edda-temporal/workflows/runapi"
)

// Register adds the task and run workflows to a worker or replayer under
// their stable names, so that the temporal CLI can start them as
// `TaskWorkflow` and `RunWorkflow`.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(TaskWorkflow, workflow.RegisterOptions{Name: TaskWorkflowName})
	r.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: runapi.RunWorkflowName})
	r.RegisterWorkflowWithOptions(IntentFireWorkflow, workflow.RegisterOptions{Name: intentapi.FireWorkflowName})
}
