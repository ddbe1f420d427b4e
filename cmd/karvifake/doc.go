// Command karvifake runs the karvi-compatible fake server as its own
// process, for `make run` and for benchmarks that want karvi out of process.
//
//	karvifake -addr 127.0.0.1:3461 -task T5:dispatched:brief -task T6:pending
//
// -task is ID:STATUS[:BRIEF] and may repeat; BRIEF is "brief" (briefPath and
// an empty brief that PATCH can merge into), "path" (briefPath but no brief
// file yet, so only PUT succeeds) or "none" (the default: no briefPath, the
// brief routes answer 404). The admin token comes from -token, else from
// KARVI_API_TOKEN; it is never printed. Accepted writes can be read back at
// GET /_fake/writes/ID. -rate-limit (KARVI_RATE_LIMIT) is karvi's limit;
// -time-scale (KARVI_EDDA_TIME_SCALE) makes its minute pass faster, as the
// worker's does at the same setting. SIGINT or SIGTERM stops the server.
package main
