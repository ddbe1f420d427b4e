// Package intake holds the pure rules by which this runtime takes work from
// a karvi board: how the board reads (Board, DecodeBoard), which tasks are
// routed here (Ours), the DispatchPlan a claimed task runs with
// (BuildDispatch), and what one look at the board asks the runtime to do
// (Reconcile) given what it has already claimed (State).
//
// Nothing here does I/O or talks to Temporal: the intake workflow that
// follows karvi's feed feeds board snapshots in and carries out the
// actions. docs/intake.md describes karvi's side and the workflow's design.
package intake
