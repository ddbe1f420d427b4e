//go:build realserver

// Package testrig is the rig of the suites that run against real processes
// (e2e and faults): a Temporal dev server shared by a suite's tests, and per
// test a task queue, a work root, a brief sink, a worker process running the
// conductor simulator and, when the karvi sink is chosen, an in-process
// karvi fake, all on 127.0.0.1. It starts tasks, watches them through the
// status query, reads what the sinks received, and checks on cleanup that no
// conductor process outlived the test.
//
// Every suite polls with its waits: WaitFor, Eventually and EventuallyEvery
// (and Query for a workflow's query); a wait that times out says what it
// waited for and what it saw last.
//
// The rig builds only with the realserver tag, like the suites it serves:
// they need the temporal CLI and the project's binaries (`make temporal
// build`), and fail, never skip, when those are missing. The waits build
// without it, for unit tests.
package testrig
