// Package e2e holds the end-to-end tests: a real Temporal dev server, the
// worker binary as a separate process (so it can be killed), the conductor
// simulator, and the file or karvi sink, run through testkit/testrig.
//
// The tests build only with the realserver tag (`make test` sets it after
// building the binaries): a plain `go test ./...` leaves them out, and a
// tagged run without the binaries fails instead of skipping.
package e2e
