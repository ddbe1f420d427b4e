package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/workflows/taskapi"
)

// Register adds the task workflow, and the reader of its event stream, to a
// worker or replayer under their stable names, so that the temporal CLI can
// start them as `TaskWorkflow` and `TaskEvents`.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(TaskWorkflow, workflow.RegisterOptions{Name: TaskWorkflowName})
	r.RegisterWorkflowWithOptions(EventsWorkflow, workflow.RegisterOptions{Name: taskapi.EventsWorkflowName})
}
