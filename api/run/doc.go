// Package runapi is the public interface of the run workflow: its names,
// input, the requests it accepts, the views it answers with, and Runs, every
// Temporal call a client makes on a run (start, updates, queries, result).
// Clients (the starter, the intake and intent activities, tests) import
// this package, never the workflow's implementation.
package runapi
