// Package limits recognises that a coding agent stopped because it hit a
// usage limit (a subscription window, a spend cap, a provider's rate limit)
// and, where the agent said so, when that limit resets. docs/pauses.md is the
// reader's guide; this comment is the contract.
//
// It is pure: no I/O, no clock, no globals that change. Callers pass the text
// and the time they saw it ("now"); the same input and now always give the
// same Verdict.
//
// Two kinds of input:
//
//   - Transcript lines (Detector.Line), one JSON object per line, as Claude
//     Code's stream-json and `codex exec --json` print them. Machine-readable
//     signs come first: a rate_limit_event whose rate_limit_info.status is
//     "rejected" (its resetsAt, in Unix seconds, is the reset), and a result
//     line with is_error true and api_error_status 429. Claude Code reports a
//     usage limit as a SUCCESS-shaped result (subtype "success", is_error
//     true, cost 0), so the subtype is never trusted. Codex's
//     {"type":"error","message":...} and {"type":"turn.failed","error":
//     {"message":...}} lines have their message read as text. Every other
//     line (assistant text, tool output, which may quote anything) is
//     ignored, and a non-error result is only read when its whole text is a
//     known limit message.
//   - Free text (Detector.Text): a conductor's phase_failed error, the error
//     in state.json, the tail of an agent's stderr.
//
// Text is matched against patterns, in this order: the caller's own
// (Config.Patterns), then the built-in ones for the message forms Claude Code,
// the Anthropic API, Codex and the OpenAI API print (DefaultPatterns), then a
// generic rule: a reset phrase ("retry after 30s", "try again in 17
// seconds", "resets at 4pm (Europe/Paris)") counts only on a line that also
// states a limit ("rate limit exceeded", "429", "too many requests", "quota
// exceeded", ...) and does not read like test output ("--- FAIL", "expected",
// "want", "assert", a TestXxx name), in a text that is not a check's or a
// test run's output as a whole (a conductor's "check failed: ..." error, go
// test, pytest, cargo or npm output): those are the project's programs
// talking, never the agent's provider. A text that merely mentions a rate limit,
// such as "test TestRateLimit failed" or "expected rate limit 10 got 5", is
// not a usage limit; user patterns that would match such texts are refused.
//
// The reset time comes from the sign or the message: Unix seconds, a
// duration ("6.379s", "17 seconds", "1m30s") added to now, or a printed time
// ("3:30am", "Jan 18, 11:30am", "Apr 23 at 4pm", "Sep 26th, 2026 3:05 PM",
// "2026-04-01 at 00:00 UTC") read in the zone printed with it (an IANA name
// in parentheses, or UTC/GMT/Z), else in Config.Zone (UTC by default). A
// time without a date is the next such time after now; a date without a year
// the next such date. The IANA database is embedded (time/tzdata), so zone
// names resolve on hosts without one. When no reset can be read, or a printed
// zone is unknown, ResetAt is zero: the caller waits for its own configured
// time.
//
// Reader follows a transcript as it is written: feed it bytes as they arrive
// (the last line may be partial) and it reports the first limit it sees.
package limits
