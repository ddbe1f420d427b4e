// Package runplan reads a run: many dependent karvi tasks carried to the end
// together (a karvi project, or a KARIMO PRD's task list). It parses and
// validates the run file, orders its tasks by dependency level and builds
// the DispatchPlan each task's workflow starts from, with its upstream
// tasks' outcomes as artifacts.
//
// It is pure: no I/O and no Temporal, so the same rules hold in the
// starter's dry run, in tests and in the workflow that will carry a run.
package runplan
