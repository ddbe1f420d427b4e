// Package soak holds the pure parts of the soak: the journal a driver keeps
// of what it did, the snapshot of what the system left behind (Observed),
// and the invariants checked over both. Nothing here does I/O or talks to
// Temporal, so every rule is table-tested and fuzzed on its own; the
// collectors that fill an Observed from a work root, the brief sink, the
// karvi fake, /proc and the workflows' queries live in soak/observe, and
// the driver binary in cmd/soak.
//
// Each invariant is a function from an Observed to the violations it
// finds. A violation names the invariant, the task and evidence precise
// enough for a person to find the problem (attempt, plan, times, values).
package soak
