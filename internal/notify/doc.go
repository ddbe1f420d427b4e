// Package notify tells a person about a task by webhook: a JSON POST of an
// Event (paused, resumed, stalled, blocked, host_lost, run_ended) to one URL.
// docs/pauses.md describes the wire format for receivers.
//
// What it promises:
//
//   - The caller never waits on the receiver. Notify only checks the event,
//     masks secrets in it (mapping/redact) and puts it on a bounded queue
//     that one goroutine drains, in order.
//   - Nothing is dropped silently. An event that cannot be delivered (the
//     receiver refused it, or its attempts ran out), an event that finds the
//     queue full, and an event still queued when Close's deadline passes are
//     appended to the dead-letter file: one JSON line each, written with a
//     single write to a file opened for appending, then fsynced, so a reader
//     sees whole lines and a crash loses at most the line being written.
//     Only if that write fails is an event lost, and then it is logged,
//     counted (Stats.Lost) and reported by Close.
//   - Each event carries a delivery id, in the body ("id") and in the
//     X-Karvi-Edda-Delivery header, the same on every retry, so a receiver
//     that saw an attempt it answered too late skips the repeat. An event
//     without an id gets one derived from its content, so the same event
//     sent twice (after a crash, say) gets the same id too.
//   - Each attempt is signed as it is sent: X-Karvi-Edda-Timestamp is the
//     Unix time in seconds, and X-Karvi-Edda-Signature is "sha256=" and the
//     hex HMAC-SHA256, under the configured secret, of that timestamp, a
//     dot and the exact body bytes. Receivers check it with VerifyRequest,
//     which also refuses a timestamp more than Tolerance from their clock,
//     so a captured delivery sent again later is refused.
//   - Attempts are retried on a network error, a timeout, 408, 429 and 5xx,
//     with exponential backoff and jitter, bounded by MaxBackoff (a 429's or
//     503's Retry-After is honoured up to that bound) and by MaxAttempts.
//     Any other answer is final: 2xx delivers, the rest dead-letters.
package notify
