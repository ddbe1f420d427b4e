// Command eddasim simulates edda's plan conductor (`edda conduct ...`) so the
// bridge can be tested end to end without edda or an AI agent installed. It
// is an independent implementation of edda's side of the contract: it shares
// no code or types with the project's mapping package, so a misreading of
// the contract on one side is not silently mirrored on the other.
//
// # Command line (edda's)
//
//	eddasim conduct run <PLAN_FILE> [--cwd DIR] [--json] [-q] [--dry-run]
//	eddasim conduct status [PLAN] [--json]
//	eddasim conduct abort [PLAN] [--plan NAME]
//	eddasim conduct retry <PHASE> [--plan NAME]
//	eddasim conduct skip <PHASE> [--reason R] [--plan NAME]
//
// `run` works in --cwd, else plan.cwd relative to the plan file, else the
// plan file's directory, and keeps its files in {cwd}/.edda/conductor/{plan}/:
// events.jsonl (append-only; seq restarts at 0 in every run process),
// state.json (edda's PlanState, replaced atomically), runner-status.json,
// and, for tests, phase-env-{phase}.json (the env edda would give the phase's
// agent: the phase's own env map; edda does not apply the plan-level env) and
// agent-{phase}.pid for `child` agents. Running a plan that has state resumes
// it: passed and skipped phases are not re-run and no plan_start is written;
// an aborted plan exits 0 at once; a completed one writes plan_completed again.
// Phases run one at a time in edda's order: topological, ties broken by
// phase id (alphabetically), not by file order.
//
// The other verbs act on the nearest .edda/conductor/ at or above the current
// directory. `abort` only rewrites state.json (plan_status aborted); it
// signals no process and writes no event. A running `run` notices the abort
// before starting its next phase or attempt and never overwrites it.
//
// As edda's, a run stops at a failed or stale phase until `conduct retry`
// resets it. A phase a dead conductor left running is left alone: within
// its timeout a new run exits 0 doing nothing; past it the run prints
// `Plan blocked: phase "x" is Some(Stale)` but saves nothing, and retry and
// skip refuse a running phase, so the plan cannot be continued.
//
// Every agent call's cost is added to state.json's total_cost_usd before
// the checks run; phase_failed carries no cost. Each phase attempt leaves
// its agent's stream-json in transcripts/{phase}-{first 8 of the session
// id}.jsonl (system init, assistant text, and a result line with
// total_cost_usd, usage and the result text when the agent finished). The
// agent's standard error is discarded.
//
// Exit codes: 0 for every plan outcome (completed, blocked, timed out,
// budget exceeded, aborted, interrupted by SIGINT); 1 for an error such as
// an invalid plan ("Error: ..." on stderr); 2 for a usage error; 3 when a
// `die` directive simulates a conductor crash. SIGINT is graceful: the
// agent is killed, phase_failed "conductor shutdown" recorded and the phase
// put back to pending whatever attempts are left, so a later run continues.
// SIGTERM is not handled: the process dies at once, leaving state.json as
// it was (the phase running), and its agent, like a killed edda.
//
// # Scenarios
//
// Behaviour is chosen by the plan, so one binary serves every test. A
// directive `[sim key key=value key="quoted value" ...]` in a phase's prompt or
// context applies to that phase; in the plan purpose it applies to every
// phase, and `[sim phase=ID ...]` to phase ID only. EDDASIM_SCENARIO holds the
// same syntax without brackets (groups separated by `;`) as lowest-priority
// defaults. Priority, low to high: EDDASIM_SCENARIO, its phase=ID groups,
// purpose, its phase=ID groups, the phase's context, the phase's prompt.
// `pass` at a higher priority clears the outcome keys set below it.
//
//	pass              default outcome
//	fail[=N|always]   checks fail on attempts 1..N (bare: always); error_type check_failed
//	crash[=N|always]  the agent crashes on attempts 1..N (bare: always); agent_crash, retried;
//	                  `eddasim: agent of phase "X" crashed (attempt N): <error>` on stderr
//	die[=N]           after phase_start of attempt N (default 1) the conductor exits 3, saying
//	                  `eddasim: simulated conductor crash in phase "X" (attempt N)` on stderr
//	hang              the agent never returns; the phase timeout_sec (default 1800) still fires
//	hang=forever      the agent never returns and timeouts are ignored; only a signal ends it
//	timeout           the agent reports a timeout: phase stale, plan blocked
//	budget, maxturns  the agent stops on budget/max turns: failed, budget_exceeded, plan blocked
//	skip [reason=R]   the phase is skipped (phase_skipped) without running
//	limit[=fail|pass] the agent's account hits its usage limit, as Claude Code reports it: the
//	                  transcript gets a rejected rate_limit_event (resetsAt) and a result with
//	                  subtype success, is_error true, api_error_status 429 and cost 0; the
//	                  checks then fail (fail, the default: attempts spent at once) or pass
//	                  (pass: the phase passes with no work done) until the reset; codex: the
//	                  Codex CLI's way, a turn.failed line with its message, then an agent crash
//	                  "agent exited with code 1 without result"; crash: an agent crash whose
//	                  message is the limit's text (reaches phase_failed's error)
//	resets=DURATION   how long a limit lasts from its first hit (default 2s); kept in
//	                  sim-limit-{phase} in the state directory, so a later run meets it too
//	stall=DURATION    the agent writes nothing (no transcript line, no event) for DURATION after
//	                  its init line, then works as directed; the phase timeout still fires;
//	                  a redispatched plan (REDISPATCH in the phase env) does not stall
//	linger=DURATION   plan-wide: the conductor stays alive DURATION after its plan_completed
//	                  before it exits (one slow to exit, as when it waits on its agents)
//	delay=DURATION    simulated agent time per attempt (Go duration; default 50ms)
//	cost=F|null       cost_usd the agent reports per finished attempt (default 0.10)
//	error="msg"       failure text for fail/crash/checks=fail
//	checks=real|pass|fail  run the phase's checks (default), pass them, or fail the first
//	events=N          N extra agent_progress{phase_id,n} events per attempt
//	tools=N           a finished attempt's transcript shows N tool calls: an assistant message
//	                  with a tool_use (Read, Grep, Bash, Edit in turn) and the user's tool_result,
//	                  each line with a timestamp, spread over the attempt's time
//	edit=PATH         a finished attempt appends a line naming the plan, phase and attempt to
//	                  PATH (relative to the cwd) and commits it when the cwd is a git work tree
//	child             the agent's wait runs in a child process (same process group)
//	orphan            as child, and the agent starts a process that outlives it (its pid in
//	                  left-{phase}.pid); edda stops neither when the conductor ends
//	strict            plan-wide: persist plan_status exactly as edda does and ignore
//	                  `conduct abort` while running (see below)
//
// Counts are attempt numbers: `crash=1 fail=2` crashes attempt 1, fails the
// checks of attempt 2 and passes attempt 3.
//
// # Strict mode
//
// Real edda updates plan_status in memory at the top of its loop only, so
// state.json reads "pending" while later phases run and is never saved as
// "blocked" (only runner-status.json says blocked); it also never re-reads
// state.json, so its next save undoes a concurrent `conduct abort`. By
// default the simulator writes running while a phase is under way and, as
// edda, pending (never blocked) for a blocked plan, and it honours aborts;
// `strict` reproduces edda's on-disk behaviour fully so consumers can be
// tested against it.
package main
