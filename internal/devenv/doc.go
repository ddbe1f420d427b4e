// Package devenv starts the real processes that end-to-end tests, the fault
// suite and the benchmarks run against: a Temporal dev server (the temporal
// CLI built by `make temporal`) and worker processes. Everything listens on
// 127.0.0.1 and is stopped by its process id.
package devenv
