// Package slotflow is the slot pool wing's workflow: SlotPoolWorkflow holds
// one agent slot pool, answers acquire and release updates from task
// workflows, and checks that its holders are still alive. The rules are
// package slots's; clients use slotapi; the activities are
// activities/slotact.
package slotflow
