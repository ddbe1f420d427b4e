// Package workflows registers the runtime's workflows with a worker or a
// replayer under their stable names. Each feature is a wing of its own:
//
//   - taskflow: TaskWorkflow, one karvi task run by the conductor, and the
//     reader of its canonical event stream (client API: taskflow/taskapi);
//   - runflow: RunWorkflow, a run of dependent tasks as child task
//     workflows, with its status.json and git worktrees (runflow/runapi);
//   - slotflow: SlotPoolWorkflow, an agent slot pool (slotflow/slotapi);
//   - intentflow: IntentFireWorkflow, one fire of a schedule intent
//     (intentflow/intentapi);
//   - accountflow: AccountWorkflow, an agent account's usage-limit pause
//     (accountflow/accountapi);
//   - intakeflow: IntakeWorkflow, karvi's board driving the runtime
//     (intakeflow/intakeapi).
//
// Their activities are in the wings of the same names under activities/;
// flowkit holds the little they share. Code under workflows/ stays
// deterministic: every side effect goes through an activity.
package workflows
