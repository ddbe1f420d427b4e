//go:build realserver

package testrig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"karvi-edda-temporal/testkit/devenv"
)

// binaries are what the suites run: a missing one fails the whole suite
// before any test starts, so that a tagged run never passes on less.
var binaries = []string{"temporal", "worker", "eddasim", "starter"}

var (
	// suite names the running test binary's suite ("e2e", "faults"): it
	// prefixes task queues and error messages.
	suite string
	// shared is the dev server of every rig that brings no server of its own.
	shared *devenv.Server
)

// Main is a suite's TestMain: it checks the binaries, starts the shared dev
// server, runs the tests and stops the server. It exits non-zero when
// anything is missing.
func Main(m *testing.M, name string) {
	suite = name
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var missing []error
	for _, b := range binaries {
		if _, err := devenv.Binary(b); err != nil {
			missing = append(missing, err)
		}
	}
	if err := errors.Join(missing...); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", suite, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sharedServer(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", suite, err)
		return 1
	}
	defer s.Stop()
	shared = s
	return m.Run()
}

// sharedServer starts the suite's dev server or, when ExternalAddressEnv
// names a running server, uses it in a namespace of this run's own, which
// every process the tests start inherits as TEMPORAL_NAMESPACE.
func sharedServer(ctx context.Context) (*devenv.Server, error) {
	addr, ok := devenv.ExternalAddress()
	if !ok {
		return devenv.StartServer(ctx, devenv.ServerOptions{})
	}
	ns := fmt.Sprintf("karvi-%s-%s", suite, time.Now().UTC().Format("20060102-150405.000"))
	s, err := devenv.ExternalServer(ctx, addr, ns)
	if err != nil {
		return nil, err
	}
	if err := os.Setenv("TEMPORAL_NAMESPACE", ns); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "%s: on the Temporal server at %s, namespace %s\n", suite, addr, ns)
	return s, nil
}
