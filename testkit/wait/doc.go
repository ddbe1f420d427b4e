// Package wait holds the waits every test polls with: WaitFor, Eventually,
// EventuallyEvery and Poll. A wait that times out fails the test saying
// what it waited for and what it saw last. It imports nothing of the
// project, so any package's tests can use it without an import cycle.
package wait
