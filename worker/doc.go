// Command worker runs a Temporal worker for every workflow of this runtime
// and their activities: a task's (TaskWorkflow, which spawns the conductor
// detached, follows its events.jsonl and delivers the brief and the
// status), a run of dependent tasks (RunWorkflow, with its git steps), an
// agent slot pool, a schedule intent's fire, an agent account's pause and,
// with -intake-karvi, the intake that follows karvi's board. Besides the
// shared task queue it polls its host's queue (<task-queue>@<host>, where
// its conductors' activities go) and the slot pools' queue, and sweeps the
// conductors of attempts given up.
//
// Its configuration (work root, conductor command, brief sink, karvi
// address and token, ...) lives in the worker's flags and environment,
// never in workflow input. Each flag is declared once, in workerFlags
// (flags.go), from which `worker -h` and the table of
// docs/configuration.md are made.
package main
