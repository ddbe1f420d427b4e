// Package e2e holds the end-to-end tests: a real Temporal dev server, the
// worker binary as a separate process (so it can be killed), the conductor
// simulator, and the file or karvi sink. `make test` builds the binaries
// first; the tests fail, not skip, when they are missing.
package e2e
