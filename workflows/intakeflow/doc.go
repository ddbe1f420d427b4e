// Package intakeflow is the karvi intake workflow: one long-lived workflow
// per karvi board that takes the tasks karvi routes to this runtime and
// starts their workflows, exactly once, and turns what people do on the
// board (cancel, send back, pause a project) into signals and updates.
// The rules are package intake's; the activities (package intakeact)
// read karvi and talk to Temporal; clients use intakeapi. docs/intake.md
// describes it.
package intakeflow
