// Package runact holds the run wing's side effects: Activities write a
// run's status.json and canonical stream and wait for task workflows an
// earlier run of the workflow started; GitActivities prepare the feature
// branch, give each task a worktree, merge it back and remove it.
package runact
