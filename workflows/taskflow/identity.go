package taskflow

import (
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/mapping"
)

// An attempt's identity is its plan name: the task id, the attempt number
// and the nonce of the workflow chain that made it
// (mapping.AttemptPlanName). Its run directory, its conductor's state
// directory, the fence's judgement and its agent slot's key all follow
// from it. The number alone is not enough: every new workflow of a task
// (a run's next loop, a second run naming the task, a schedule's next
// fire, a `starter start` after the last workflow ended) numbers its
// attempts from where it starts, and the record left in an earlier
// workflow's run directory would be taken for the new attempt's. The
// nonce hashes the workflow id with the chain's first run id, which
// continue-as-new keeps, so a chain's attempts share it and no other
// chain has it.

// adoptChain gives the workflow its chain's nonce, once: the attempts it
// begins from now on carry it. An attempt already under way keeps the
// name (and the slot key) it began with.
func (r *taskRun) adoptChain() {
	if r.st.Chain != "" {
		return
	}
	if workflow.GetVersion(r.ctx, versionAttemptIdentity, workflow.DefaultVersion, 1) < 1 {
		return
	}
	r.st.Chain = chainNonce(workflow.GetInfo(r.ctx))
}

// chainNonce is the nonce of the workflow chain info belongs to; "" when
// the chain has no first run id (the SDK's test environment gives none),
// and its attempts are then named by number only.
func chainNonce(info *workflow.Info) string {
	first := firstRunID(info)
	if first == "" {
		return ""
	}
	return mapping.AttemptNonce(info.WorkflowExecution.ID, first)
}

// firstRunID is the chain's first run id; a variable only so that tests in
// the SDK's environment, which has none, can give one.
var firstRunID = func(info *workflow.Info) string { return info.FirstRunID }

// currentPlanName is the current attempt's plan name, also before its plan
// is written: the fence compares a live run's directory with it.
func (r *taskRun) currentPlanName() string {
	a := r.st.Current
	if name := a.PlanName(); name != "" {
		return name
	}
	return mapping.AttemptPlanName(r.st.Dispatch.TaskID, a.N, a.Nonce)
}
