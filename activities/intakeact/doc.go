// Package intakeact holds the karvi intake's activities: following
// karvi's live feed and board, and carrying out the intake's actions
// (starting, redispatching and aborting task workflows, starting and
// pausing runs, blocking tasks on karvi).
package intakeact
