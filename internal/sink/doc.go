// Package sink is where a task's brief and status go, behind one interface
// with two implementations:
//
//   - File, the embedded default: a directory per task holding brief.json
//     (merged by karvi's exact rules from internal/jsonmerge, so the file
//     equals what karvi would hold), patches.jsonl (an append-only audit of
//     every PATCH received) and status.json (status, blocker, dispatch and
//     history).
//   - Karvi, which sends the same writes to a karvi server through
//     internal/karvi, walking karvi's legal status transitions.
//
// Both sinks plan status changes with karvi.PathTo, so a status the
// workflow cannot reach in karvi fails the same way with the file sink.
// Input errors and illegal transitions are *karvi.Error values (kinds
// BadRequest, IllegalTransition) for both sinks, so a caller classifies
// failures with karvi.IsRetryable / karvi.IsPermanent whichever sink it
// has; file system errors are plain wrapped errors, worth retrying.
package sink
