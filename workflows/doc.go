// Package workflows registers the runtime's workflows with a worker or a
// replayer under their stable names. Each feature is a wing of its own:
//
//   - taskflow: TaskWorkflow, one karvi task run by the conductor, and the
//     reader of its canonical event stream (client API: api/task);
//   - runflow: RunWorkflow, a run of dependent tasks as child task
//     workflows, with its status.json and git worktrees (api/run);
//   - slotflow: SlotPoolWorkflow, an agent slot pool (api/slot);
//   - intentflow: IntentFireWorkflow, one fire of a schedule intent
//     (api/intent);
//   - accountflow: AccountWorkflow, an agent account's usage-limit pause
//     (api/account);
//   - intakeflow: IntakeWorkflow, karvi's board driving the runtime
//     (api/intake).
//
// Their activities are in the wings of the same names under activities/;
// flowkit holds the little they share. Code under workflows/ stays
// deterministic: every side effect goes through an activity.
package workflows
