// Package intentact holds the schedule intent wing's side effects: starting
// a fire's target workflow, waiting for it, reading the intent's schedule
// and pausing it.
package intentact
