// Package karvifake is a karvi-compatible HTTP server for tests and
// benchmarks. It listens on 127.0.0.1 only and enforces the rules of the
// real server (fagemx/karvi routes/briefs.js, routes/tasks.js,
// management.js, blackboard-server.js) for the endpoints this project uses:
//
//   - GET/PATCH/PUT /api/brief/:id ([\w-]+ ids only): PATCH is karvi's deep
//     merge (internal/jsonmerge: objects merge, arrays and scalars replace,
//     null is stored); every write stamps meta; GET and PATCH answer 404
//     {"error":"no brief for this task"} unless the task has a briefPath and
//     its brief exists; PUT creates the brief when the task has a briefPath.
//   - POST /api/tasks/:id/status with karvi's transition table and wording,
//     blocker handling, and 404 "Task X not found".
//   - POST /api/tasks/:id/update (status, result, childSessionKey, blocker).
//   - GET /api/tasks (the whole taskPlan, also for GET /api/tasks/:id).
//   - bearer-token auth on /api/* when a token is configured: 401
//     {"error":"unauthorized"}; writes need the operator role, else 403.
//
// For tests it records every accepted write in order with its receipt time
// (Writes, WaitWrites) and injects faults: SetDown closes the listener and
// every connection (a real "connection refused") and reopens on the same
// port, FailNext answers the next writes with a chosen status, SetLatency
// delays every answer.
//
// Deliberate differences from karvi, all on inputs this project never sends:
// a PATCH/PUT body that is an array or scalar gets 400 (karvi would merge
// its indexes as keys); writes to the brief and update routes need the
// operator role (karvi 0.2.0 checks the role only on the status route); a
// truthy non-object meta is replaced by an object.
package karvifake
