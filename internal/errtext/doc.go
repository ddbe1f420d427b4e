// Package errtext says what a person reads of an error that came through
// Temporal: the message of the innermost application error (the activity
// or workflow that failed said what went wrong), not the chain of
// workflow, child and activity wrappers around it. Workflows, activities
// and the starter share it so the same failure reads the same everywhere.
package errtext
