// Package runapi is the public interface of the run workflow: its names,
// input, the requests it accepts and the views it answers with. Clients (the
// starter, tests) import this package, never the workflow's implementation.
package runapi
