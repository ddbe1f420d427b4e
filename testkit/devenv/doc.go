// Package devenv starts the real processes that the test rig
// (testkit/testrig) and the benchmarks run against: a Temporal dev server
// (the temporal CLI built by `make temporal`) and worker processes, and it
// finds and stops the conductors those workers leave recorded under a work
// root. Everything listens on 127.0.0.1 and is stopped by its process id.
package devenv
