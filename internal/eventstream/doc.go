// Package eventstream stores canonical event streams on disk, one
// append-only JSONL file per stream, <dir>/<run_id>.jsonl, one event per
// line: the layout a viewer that watches a folder tails, each file by its
// own offset.
//
// Appends are idempotent. Every event names its source line in raw_ref
// (file:...#gen=G&offset=N for a conductor line, temporal://...#seq=N for
// a workflow step), and each source's events come in order, so the file
// holds, per source, a high-water mark: an event at or below its source's
// mark is already there and is skipped. A writer retried from an earlier
// checkpoint, a worker killed mid-batch and restarted, a workflow
// continued as new: each sends again what may already be stored, and
// nothing is stored twice. The marks are rebuilt from the file itself, so
// they survive the process; the file is locked (flock) while it is read
// and written, so two processes appending to one stream take turns.
//
// Every event goes through Validate, the stream's transition check and
// Redact before it is written: what is stored has been through both, with
// no way around it. An event that does not validate is dropped and
// counted; warnings are reported, the event kept.
//
// A writer killed in the middle of a write can leave a partial last line.
// The next append, under the lock, cuts it off (its event has no mark yet,
// so it is written again whole). Readers only ever see complete lines.
package eventstream
