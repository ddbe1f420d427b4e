package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/workflows/runapi"
	"karvi-edda-temporal/workflows/taskapi"
)

// Register adds the task and run workflows, and the reader of a task's event
// stream, to a worker or replayer under their stable names, so that the
// temporal CLI can start them as `TaskWorkflow`, `RunWorkflow` and
// `TaskEvents`.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(TaskWorkflow, workflow.RegisterOptions{Name: TaskWorkflowName})
	r.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: runapi.RunWorkflowName})
	r.RegisterWorkflowWithOptions(EventsWorkflow, workflow.RegisterOptions{Name: taskapi.EventsWorkflowName})
}
