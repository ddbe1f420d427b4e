// Package canonical is the first layer of the canonical event stream: one
// event shape for everything an agent run reports (whichever tool produced
// it), its validation, its redaction, and the mapping of conductor events
// into it. It is pure: no I/O, no clock, no Temporal; the same input gives
// the same output.
//
// An event says who (agent_id, role, parent_agent_id) in which run (run_id,
// mode, provider) is in what state (state) and what happened (type,
// payload), what it cost (metrics) and where its source line is (raw_ref).
// State and type are independent: a phase whose check failed is still
// running and reports a verify whose payload result is fail.
//
// Validation (Validate, Stream) sorts problems three ways:
//   - a missing required field or a value in the wrong format is an error:
//     the caller drops the event and counts it (Stream.Dropped) and carries on;
//   - a value outside its enum is degraded to a fallback, with a warning;
//   - a state change the transition table does not allow (Transition) is a
//     warning; the event is kept.
//
// The fallbacks. The written schema says an unknown value becomes "unknown",
// but "unknown" is a member of the mode enum only; a provider, role, state or
// type of "unknown" would fail its own enum check again, so an event degraded
// that way could never validate cleanly. The viewer that consumes these
// events degrades provider to system, state to idle and type to state_change,
// all members of their enums. The rule here is therefore: every enum falls
// back to a member of itself — provider system, state idle, type
// state_change (as the viewer does), role custom (what the schema gives an
// unregistered role), mode unknown (the schema's own member). An event that
// carries the literal "unknown" in provider, role, state or type, as a
// producer following the written schema would emit, is accepted the same way
// and mapped to that fallback, so both conventions meet in one stream.
//
// Redaction (Redact) runs on every event after validation and masks secrets
// in every string, the payload to depth 10, with the rules of mapping/redact.
//
// Besides the conductor's events, a task's stream carries the task
// workflow's own steps (FromStep): the workflow is an agent too, parent of
// each attempt's conductor, and its steps name their source the way a
// conductor line does (raw_ref), so a store can tell an event it already
// holds from a new one.
package canonical
