//go:build realserver

// Package testrig is the rig of the suites that run against real processes
// (e2e and faults): a Temporal dev server shared by a suite's tests, and per
// test a task queue, a work root, a brief sink, a worker process running the
// conductor simulator and, when the karvi sink is chosen, an in-process
// karvi fake, all on 127.0.0.1. It starts tasks, watches them through the
// status query, reads what the sinks received, and checks on cleanup that no
// conductor process outlived the test.
//
// Every suite polls with the waits of package wait (WaitFor, Eventually,
// EventuallyEvery, Poll) and asks a workflow's query with Query; a wait that
// times out says what it waited for and what it saw last.
//
// The rig builds only with the realserver tag, like the suites it serves:
// they need the temporal CLI and the project's binaries (`make temporal
// build`), and fail, never skip, when those are missing. The waits are a
// package of their own (testkit/wait) that imports nothing of the project,
// so unit tests of any package use them too.
package testrig
