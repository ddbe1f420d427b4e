// Package karvi is the HTTP client for karvi's brief and task APIs, the
// board where each task's brief and status end up.
//
// The caller is usually a Temporal activity whose retry policy owns
// backoff, so the client mostly only says whether a failure is worth
// retrying. Two answers it handles itself, because karvi did nothing with
// the request: a 429 (karvi's rate limit) is sent again after its
// Retry-After, and a version conflict a few times at once. Every client of
// one karvi address in the process shares one rate limiter a little under
// karvi's (gate.go) and one board snapshot (board.go). Errors are *Error
// values with a Kind (NoBrief, IllegalTransition, Unauthorized, NotFound,
// Transient, Conflict, BadRequest) and keep karvi's own error text.
// RetryTransient serves callers outside Temporal.
//
// The bearer token is sent only in the Authorization header and is scrubbed
// from every error string, since errors end up in Temporal history and logs.
//
// Behaviour matched to karvi's server (fagemx/karvi, routes/briefs.js and
// routes/tasks.js):
//   - brief ids must match [\w-]+; other ids never reach the brief routes.
//   - GET /api/tasks returns the whole taskPlan; karvi has no per-task GET
//     (GET /api/tasks/:id returns the same whole plan), so GetTask lists and
//     filters.
//   - POST /api/tasks/:id/update honours only status, result,
//     childSessionKey and blocker; UpdateTask refuses other keys rather than
//     let a caller believe that, say, dispatch was written.
//   - the status transition table is Transitions; karvi rejects X -> X.
package karvi
