// Package tailer reads the conductor's events.jsonl incrementally from a
// cursor that the workflow carries in its history.
//
// The conductor appends best effort, so a reader can see a partial last line;
// the log may not exist yet when the tail starts, and a redispatch or a manual
// cleanup can truncate or replace it. ReadFrom turns all of that into plain
// data (complete lines, a new cursor, flags) instead of errors, so a retried
// or restarted activity resumes exactly where the workflow's cursor says, and
// never delivers a line twice within one generation of the file.
//
// Wait adds low latency on top: it watches the log's directory with inotify
// (falling back to polling when a watch cannot be made), so an appended line
// is seen within milliseconds, and it lingers briefly to hand a burst of lines
// over as one batch.
package tailer
