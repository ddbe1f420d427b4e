package limits

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// How a pattern's reset is read (Pattern.Reset).
const (
	// ResetAuto reads the reset from the reset phrases that follow the
	// match ("resets 3:30am (Europe/Moscow)", "try again in 6s", ...).
	ResetAuto = "auto"
	// ResetNone never reads a reset from the message: ResetAt stays zero.
	ResetNone = "none"
	// ResetUnix reads the group named "reset" as Unix seconds.
	ResetUnix = "unix"
	// ResetAfter reads the group named "reset" as a wait from now: "30",
	// "6.379s", "17 seconds", "1m30s".
	ResetAfter = "after"
	// ResetTime reads the group named "reset" as a printed time, with an
	// optional date ("Jan 18, 11:30am", "2026-04-01 at 00:00") and zone
	// (an IANA name in parentheses or UTC), or a group named "zone".
	ResetTime = "time"
)

// Pattern is one recognised message form. Its regexp is RE2 syntax
// (https://github.com/google/re2/wiki/Syntax), matched case-insensitively
// unless it turns that off with (?-i); a match means "this is a usage limit".
type Pattern struct {
	// Name identifies the pattern in Verdict.Source ("pattern:NAME") and in
	// errors: letters, digits, '.', '_' and '-'.
	Name string `yaml:"name" json:"name"`
	// Match is the regexp.
	Match string `yaml:"match" json:"match"`
	// Reset says how to read the reset: auto (the default), none, unix,
	// after or time; the last three need a group named "reset".
	Reset string `yaml:"reset,omitempty" json:"reset,omitempty"`
}

type compiled struct {
	Pattern
	re *regexp.Regexp
	// whole is set for patterns that are a complete limit message by
	// themselves; only these are read in a result the agent did not mark
	// as an error, and only at its start.
	whole bool
	// builtin patterns all need one of hintWords in the text.
	builtin bool
}

// DefaultPatterns returns the built-in message forms, in the order they are
// tried. The slice is a copy.
func DefaultPatterns() []Pattern {
	out := make([]Pattern, len(defaults))
	for i, c := range defaults {
		out[i] = c.Pattern
	}
	return out
}

var defaults = mustCompile([]Pattern{
	// Claude Code, older: the reset as Unix seconds after a bar.
	{Name: "claude-usage-limit-unix", Match: `claude(?: ai| code)? usage limit reached\|(?P<reset>\d{9,13})`, Reset: ResetUnix},
	{Name: "claude-usage-limit", Match: `claude(?: ai| code)? usage limit reached`},
	// Claude Code: "You've hit your limit · resets 3:30am (Europe/Moscow)",
	// "You've hit your session limit ...", "You've hit your weekly limit";
	// Codex: "You've hit your usage limit. ... try again at 3:42 PM."
	{Name: "hit-your-limit", Match: `you(?:'|’)?ve (?:hit|reached) your (?:[a-z0-9-]+ ){0,2}limit\b`},
	// Claude Code: "5-hour limit reached ∙ resets 12pm", "Weekly limit
	// reached", "Opus weekly limit reached".
	{Name: "claude-window-limit-reached", Match: `\b(?:5-hour|five-hour|session|daily|weekly|opus|sonnet)(?: (?:weekly|session|usage))? limit reached\b`},
	{Name: "claude-extra-usage", Match: `you(?:'|’)?re out of extra usage\b`},
	{Name: "claude-request-rejected-429", Match: `api error: request rejected \(429\)`},
	// The Anthropic API's 429 body.
	{Name: "anthropic-rate-limit-error", Match: `"error"\s*:\s*\{\s*"type"\s*:\s*"rate_limit_error"`},
	// The Anthropic API's spend cap (HTTP 400): "You have reached your
	// specified API usage limits. You will regain access on 2026-04-01 at
	// 00:00 UTC."
	{Name: "anthropic-api-usage-limits", Match: `you have reached your specified api usage limits?\b`},
	// Codex: spend caps and credits.
	{Name: "codex-spend-cap", Match: `you(?:'|’)?(?:ve)? hit your spend cap\b|\byou(?:'|’)?ve reached your spend cap\b`},
	{Name: "codex-out-of-credits", Match: `\bworkspace is out of credits\b`},
	// The OpenAI API, as Codex prints it.
	{Name: "openai-quota-exceeded", Match: `\bquota exceeded\. check your plan and billing details`},
	{Name: "openai-rate-limit-reached", Match: `\brate limit reached for [a-z0-9][a-z0-9._:/-]*`},
}, true)

// Patterns that are a whole message by themselves (see compiled.whole).
var wholeNames = map[string]bool{
	"claude-usage-limit-unix": true, "claude-usage-limit": true, "hit-your-limit": true,
	"claude-window-limit-reached": true, "claude-extra-usage": true,
	"claude-request-rejected-429": true, "anthropic-api-usage-limits": true,
	"codex-spend-cap": true, "codex-out-of-credits": true,
}

func mustCompile(ps []Pattern, builtin bool) []compiled {
	cs, err := compile(ps, nil)
	if err != nil {
		panic(err)
	}
	for i := range cs {
		cs[i].whole = builtin && wholeNames[cs[i].Name]
		cs[i].builtin = builtin
	}
	return cs
}

// Ordinary check failures that mention rate limits. A user pattern that
// matches one of them is too broad to tell a usage limit from a failing
// test, and is refused.
var ordinaryFailures = []string{
	"test TestRateLimit failed",
	"--- FAIL: TestRateLimiter (0.01s)\n    limiter_test.go:42: expected rate limit 10 got 5",
	"expected rate limit 10 got 5",
	"check failed: cmd_succeeds: exit 1: FAIL\tgithub.com/acme/api/ratelimit\t0.012s",
	"assertion failed: want status 429 Too Many Requests, got 200",
	"error: usage: limit must be a positive integer",
	"TestQuota: quota exceeded check did not fire",
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// compile checks and compiles patterns; taken holds names already in use.
func compile(ps []Pattern, taken map[string]bool) ([]compiled, error) {
	seen := make(map[string]bool, len(ps)+len(taken))
	for n := range taken {
		seen[n] = true
	}
	out := make([]compiled, 0, len(ps))
	var errs []error
	for i, p := range ps {
		c, err := compileOne(p)
		if err == nil && seen[p.Name] {
			err = fmt.Errorf("the name is already used by another pattern")
		}
		if err != nil {
			name := p.Name
			if name == "" {
				name = fmt.Sprintf("#%d", i+1)
			}
			errs = append(errs, fmt.Errorf("limit pattern %q: %w", name, err))
			continue
		}
		seen[p.Name] = true
		out = append(out, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func compileOne(p Pattern) (compiled, error) {
	if !nameRE.MatchString(p.Name) {
		return compiled{}, fmt.Errorf("name must be 1-64 letters, digits, '.', '_' or '-', and start with a letter or digit")
	}
	if strings.TrimSpace(p.Match) == "" {
		return compiled{}, fmt.Errorf("match is empty")
	}
	re, err := regexp.Compile("(?i)" + p.Match)
	if err != nil {
		return compiled{}, fmt.Errorf("match is not a valid regexp: %w", err)
	}
	if p.Reset == "" {
		p.Reset = ResetAuto
	}
	hasReset := re.SubexpIndex("reset") >= 0
	switch p.Reset {
	case ResetAuto, ResetNone:
	case ResetUnix, ResetAfter, ResetTime:
		if !hasReset {
			return compiled{}, fmt.Errorf("reset %q needs a group named reset, as in (?P<reset>...)", p.Reset)
		}
	default:
		return compiled{}, fmt.Errorf("reset %q is not one of auto, none, unix, after, time", p.Reset)
	}
	if re.MatchString("") {
		return compiled{}, fmt.Errorf("match %q matches empty text, so it would match everything", p.Match)
	}
	for _, s := range ordinaryFailures {
		if re.MatchString(s) {
			return compiled{}, fmt.Errorf("match %q is too broad: it matches the ordinary check failure %q", p.Match, s)
		}
	}
	return compiled{Pattern: p, re: re}, nil
}

// The generic rule: a reset phrase on a line that states a limit and does
// not read like test output.
var (
	limitStatement = regexp.MustCompile(`(?i)\b(?:rate|usage)[ _-]?limit(?:ed\b|s? (?:reached|exceeded|hit)\b)|\btoo many requests\b|\b429\b|\bquota (?:exceeded|reached|exhausted)\b|\blimit (?:reached|exceeded)\b|\bout of (?:credits|quota)\b`)
	testOutput     = regexp.MustCompile(`--- FAIL|\bFAIL[:\t ]|(?i:\bexpected\b|\bwant(?:ed)?\b|\bassert|_test\.go\b|\bpanic:)|\bTest[A-Z0-9_]\w*`)
	// checkOutput marks a whole text as the output of a check or a test
	// run (a conductor's "check failed: ..." error, go test, pytest, cargo,
	// npm): the project's own programs talking, never the agent's
	// provider, so the generic rule does not read it at all.
	checkOutput  = regexp.MustCompile(`(?im)^\s*check failed:|^=== RUN\b|^--- FAIL\b|^FAIL\t|^Traceback \(most recent call last\)|\btest result: FAILED\b|\bpanicked\b|\bAssertionError\b|^npm ERR!|^\s*\d+ (?:failed|failing)\b`)
	genericReset = regexp.MustCompile(`(?i)\b(?:retry after|try again (?:in|at)|retry in|resets?(?: at| in| on)?)\s+\S|\bretry-after:\s*\d|\bon\s+(?:\d{4}-\d{2}-\d{2}|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d)`)
)

// hintWords: every built-in pattern and the generic rule's limit statement
// contains one of them (lower case, ASCII), so a text with none of them
// skips those regexps: the common case, an ordinary error, stays cheap.
var hintWords = []string{"limit", "quota", "429", "too many requests", "spend cap", "credits", "extra usage"}

func hasHint(s string) bool {
	for _, w := range hintWords {
		if containsFold(s, w) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains sub, ASCII letters compared
// without case; sub is lower case.
func containsFold(s, sub string) bool {
	n := len(sub)
	first := sub[0]
	for i := 0; i+n <= len(s); i++ {
		if s[i]|0x20 != first && s[i] != first {
			continue
		}
		j := 1
		for ; j < n; j++ {
			c := s[i+j]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}
