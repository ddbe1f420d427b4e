// Package jsonmerge holds the one copy of karvi's brief write rules, shared by
// the karvi-compatible test server (testkit/karvifake) and the file sink
// (internal/sink), so that a brief kept on disk is byte-for-byte what karvi
// would hold after the same PATCHes.
//
// karvi's PATCH is not RFC 7396 merge-patch: nested objects merge, but arrays
// and scalars replace wholesale, and a null is stored as null rather than
// deleting the key. Every write also stamps meta (updatedAt, boardType,
// version, taskId) the way karvi's writeBrief does.
package jsonmerge
