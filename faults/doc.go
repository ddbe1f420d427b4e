// Package faults is the fault-injection suite: it runs the real worker
// binary, the conductor simulator, a Temporal dev server and, where karvi
// matters, karvifake, all on 127.0.0.1, injects one fault per test and
// asserts the end state: the right terminal status, the brief an undisturbed
// run would have written, every brief log entry exactly once, one conductor
// per attempt, and no process left behind.
//
// Faults and where they are tested:
//
//   - worker SIGKILLed at seeded random points, mid-patch and mid-signal
//     (kill_test.go); the seed is printed and FAULTS_SEED replays a run;
//   - the Temporal dev server restarted mid-run on a persistent database
//     (server_test.go);
//   - karvi refusing connections for 30 s, then answering 503, then healthy
//     (karvi_test.go);
//   - signal storms and an abort racing completion (storm_test.go);
//   - a fleet of hosts (pid namespaces with work roots of their own):
//     every worker restarted in turn during a run, a host lost with
//     everything on it, a host coming back to conductors its tasks left
//     behind (fleet_test.go, the hosts in hosts_test.go);
//   - replay of recorded histories against the current workflow code
//     (kill_test.go, and workflows/register_test.go for committed histories);
//   - conductor faults, bad event-log input, bad dispatch input and the
//     security checks (conductor_test.go, input_test.go, security_test.go).
//
// testkit/testrig runs the processes; rig_test.go adds the invariants the
// tests check at their end. Everything is bounded: deadlines exist only as
// safety nets, and no assertion depends on timing.
//
// The tests build only with the realserver tag (`make test` sets it after
// building the binaries): a plain `go test ./...` leaves them out, and a
// tagged run without the binaries fails instead of skipping.
package faults
