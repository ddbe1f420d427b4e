// Package slots holds the rules of an agent slot pool: a cap on how many
// conductors run at once, shared by every task, run and worker that names
// the pool.
//
// A Pool is a reducer. Acquire asks for a slot for one attempt of one task
// (its Key) and answers at once: granted, queued (with the waiter's place
// in line), or refused with a Reason. Release gives a slot back, or gives up
// waiting for one. A released slot goes to the next waiter in line at
// once: in order of arrival, or, in a fair pool, by turns across runs (the
// tasks outside any run are one more party; line.go says how turns go), so
// a small run is not held behind every task of a big one. SetLimits changes the
// pool's limits while it is in use: raising max_concurrent grants waiters
// at once, lowering it lets the holders finish and grants nothing until
// they are under the new limit. ExpireWaiters refuses the waiters whose
// timeout passed; Renew and ExpireLeases drop holders nobody vouched for
// within the pool's lease.
//
// Every call that frees or refuses a waiter returns Notices: what the
// caller must tell the waiters (their grant, or why they were refused),
// since they are no longer waiting for an answer to their own request.
//
// Acquire is idempotent per key: asking again for a key the pool holds or
// queues gets the same grant or the waiter's place; asking again for a key
// it refused gets the same refusal; asking for a key it released answers
// Released, never a second grant, so a request that arrives late (a retry
// racing its own answer) cannot take a slot nobody would give back. The
// pool remembers the last keys it settled (SettledKeep) for this.
//
// The package is pure: no I/O, no Temporal, no clock. Every time is passed
// in, and every list is kept in a fixed order (holders by grant, waiters by
// arrival; a fair line's turns are counted, not timed), so a workflow can
// keep a Pool as its state and replay to the same decisions.
package slots
