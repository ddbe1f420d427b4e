package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/intent"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/workflows/accountflow"
	"karvi-edda-temporal/workflows/intakeflow"
	"karvi-edda-temporal/workflows/intentflow"
	"karvi-edda-temporal/workflows/runflow"
	"karvi-edda-temporal/workflows/slotflow"
	"karvi-edda-temporal/workflows/taskflow"
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
