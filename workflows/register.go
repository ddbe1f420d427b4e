package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/workflows/accountapi"
	"karvi-edda-temporal/workflows/intentapi"
	"karvi-edda-temporal/workflows/runapi"
	"karvi-edda-temporal/workflows/slotapi"
	"karvi-edda-temporal/workflows/taskapi"
)

// Register adds the task, run and slot pool workflows, the reader of an
// event stream and the fire of a schedule intent to a worker or replayer
// under their stable names, so that the temporal CLI can start them as
// `TaskWorkflow`, `RunWorkflow`, `SlotPoolWorkflow`, `TaskEvents`,
// `IntentFireWorkflow` and `AccountWorkflow`.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(TaskWorkflow, workflow.RegisterOptions{Name: taskapi.TaskWorkflowName})
	r.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: runapi.RunWorkflowName})
	r.RegisterWorkflowWithOptions(SlotPoolWorkflow, workflow.RegisterOptions{Name: slotapi.PoolWorkflowName})
	r.RegisterWorkflowWithOptions(EventsWorkflow, workflow.RegisterOptions{Name: taskapi.EventsWorkflowName})
	r.RegisterWorkflowWithOptions(IntentFireWorkflow, workflow.RegisterOptions{Name: intentapi.FireWorkflowName})
	r.RegisterWorkflowWithOptions(AccountWorkflow, workflow.RegisterOptions{Name: accountapi.WorkflowName})
}
