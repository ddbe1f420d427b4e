package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A usage limit as Claude Code and edda meet it: the agent answers at once
// with a rate_limit_event (status rejected, resetsAt in Unix seconds) and a
// success-shaped result (subtype success, is_error true, api_error_status
// 429, cost 0, "You've hit your limit · resets ..."), and exits 1. edda
// judges the agent by the subtype, so it takes the phase as done and runs
// the checks: they fail (the agent did no work) and edda retries at once
// until the phase's attempts are spent, or, with `limit=pass` (no checks,
// or checks that already hold), the phase passes at cost 0.
//
// The limit belongs to the phase's account and lasts `resets` from its
// first hit: the reset time is kept in the plan's state directory
// (sim-limit-{phase}), so a later `conduct run` of the same plan meets the
// same limit until then and a working agent after it.

// usageLimit reports whether the phase's agent is limited now, and until
// when.
func (r *runner) usageLimit(phaseID string, spec simSpec) (time.Time, bool) {
	if spec.Limit == "" {
		return time.Time{}, false
	}
	path := filepath.Join(stateDir(r.cwd, r.plan.Name), "sim-limit-"+phaseID)
	now := time.Now()
	if data, err := os.ReadFile(path); err == nil {
		sec, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err == nil {
			reset := time.Unix(sec, 0)
			return reset, now.Before(reset)
		}
	}
	// Whole seconds, as resetsAt is: rounded up, so the limit lasts at
	// least `resets`.
	reset := now.Add(spec.Resets).Truncate(time.Second).Add(time.Second)
	if err := writeAtomic(path, []byte(strconv.FormatInt(reset.Unix(), 10)+"\n")); err != nil {
		fmt.Fprintf(os.Stderr, "eddasim: %v\n", err)
	}
	return reset, true
}

// limitedResult is what a limited agent returns, and the spec its checks
// then run with.
func limitedResult(spec simSpec, reset time.Time) (agentResult, simSpec) {
	switch spec.Limit {
	case "codex":
		return agentResult{kind: agentCrash, error: "agent exited with code 1 without result", limitReset: reset, codex: true}, spec
	case "crash":
		return agentResult{kind: agentCrash, error: codexText(reset)}, spec
	}
	zero := 0.0
	return agentResult{kind: agentDone, cost: &zero, limitReset: reset}, limitedSpec(spec)
}

// codexText is the Codex CLI's message for a usage limit.
func codexText(reset time.Time) string {
	return "You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), or try again at " +
		reset.UTC().Format("3:04:05 PM") + " UTC."
}

// limitedSpec is how the checks of a limited attempt behave.
func limitedSpec(spec simSpec) simSpec {
	s := spec
	s.Edit = ""
	if spec.Limit == "pass" {
		s.FailN, s.Checks = 0, "pass"
		return s
	}
	s.FailN = always
	s.Error = "exit 1: the agent changed nothing"
	return s
}

// limitText is the result text Claude Code prints for a limit.
func limitText(reset time.Time) string {
	return "You've hit your limit · resets " + strings.ToLower(reset.UTC().Format("3:04pm")) + " (UTC)"
}
