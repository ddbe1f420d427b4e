package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/workflows/accountflow"
	"karvi-edda-temporal/workflows/accountflow/accountapi"
	"karvi-edda-temporal/workflows/intakeflow"
	"karvi-edda-temporal/workflows/intentflow"
	"karvi-edda-temporal/workflows/intentflow/intentapi"
	"karvi-edda-temporal/workflows/runflow"
	"karvi-edda-temporal/workflows/runflow/runapi"
	"karvi-edda-temporal/workflows/slotflow"
	"karvi-edda-temporal/workflows/slotflow/slotapi"
	"karvi-edda-temporal/workflows/taskflow"
	"karvi-edda-temporal/workflows/taskflow/taskapi"
)

// Register adds every wing's workflows to a worker or replayer under their
// stable names, so that the temporal CLI can start them as `TaskWorkflow`,
// `RunWorkflow`, `SlotPoolWorkflow`, `TaskEvents`, `IntentFireWorkflow`,
// `AccountWorkflow` and the intake's.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(taskflow.TaskWorkflow, workflow.RegisterOptions{Name: taskapi.TaskWorkflowName})
	r.RegisterWorkflowWithOptions(runflow.RunWorkflow, workflow.RegisterOptions{Name: runapi.RunWorkflowName})
	r.RegisterWorkflowWithOptions(slotflow.SlotPoolWorkflow, workflow.RegisterOptions{Name: slotapi.PoolWorkflowName})
	r.RegisterWorkflowWithOptions(taskflow.EventsWorkflow, workflow.RegisterOptions{Name: taskapi.EventsWorkflowName})
	r.RegisterWorkflowWithOptions(intentflow.IntentFireWorkflow, workflow.RegisterOptions{Name: intentapi.FireWorkflowName})
	r.RegisterWorkflowWithOptions(accountflow.AccountWorkflow, workflow.RegisterOptions{Name: accountapi.WorkflowName})
	intakeflow.Register(r)
}

// RegisterPools adds the slot pool's workflow alone: the worker of the
// pools' own queue (slotapi.PoolQueue) runs nothing else.
func RegisterPools(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(slotflow.SlotPoolWorkflow, workflow.RegisterOptions{Name: slotapi.PoolWorkflowName})
}
