// Package runflow is the run wing's workflow: RunWorkflow starts a run's
// dependent tasks as child task workflows in order, loops and upgrades
// failed ones, keeps status.json, gives each task a git worktree and merges
// it back, enforces the run's budget and pauses, and continues as new. The
// rules of status.json are package runstatus's; clients use runapi; the
// activities are activities/runact.
package runflow
