// Package mapping is the pure translation between karvi and edda described in
// docs/contract.md: karvi's DispatchPlan becomes an edda plan.yaml, each line
// of the conductor's events.jsonl becomes a brief state change and the PATCH
// body that carries it, and the conductor's end (terminal event or state.json)
// becomes a karvi task status with its blocker and lastError wording.
//
// Nothing here does I/O or touches Temporal, so the workflow can hold these
// types as its state and every rule can be tested as a table.
package mapping
