package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scenarioEnv names the environment variable holding lowest-priority
// directives; `;` separates groups, e.g. "checks=pass; phase=test fail=2".
const scenarioEnv = "EDDASIM_SCENARIO"

// Defaults of a phase's simulated behaviour.
const (
	defaultDelay = 50 * time.Millisecond
	defaultCost  = 0.10
	// defaultResets is how long a simulated usage limit lasts.
	defaultResets = 2 * time.Second
)

// always marks a count-valued outcome (fail, crash) that never runs out.
const always = -1

// simSpec is the resolved behaviour of one phase.
type simSpec struct {
	FailN       int // check failure on attempts 1..FailN; always = every attempt
	CrashN      int // agent crash on attempts 1..CrashN; always = every attempt
	DieAt       int // conductor exits 3 right after phase_start of this attempt; 0 = never
	Hang        bool
	HangForever bool
	Timeout     bool
	Budget      bool
	MaxTurns    bool
	Skip        bool
	Reason      string
	Delay       time.Duration
	Cost        *float64
	Error       string
	Checks      string // real|pass|fail
	Events      int
	Tools       int // tool calls (tool_use and tool_result) in a finished attempt's transcript
	Child       bool
	// Orphan: the agent (a child process) leaves a process of its own
	// running when it ends, as an agent's background job does.
	Orphan bool
	// Edit is a file (relative to the plan's cwd) the agent changes in a
	// finished attempt, committing it when the cwd is a git work tree.
	Edit string
	// Limit: the agent's account hits its usage limit in this phase, as
	// Claude Code reports it (success-shaped, see limit.go); "fail"
	// fails the checks of a limited attempt (the agent did no work),
	// "pass" lets them pass; "codex": the Codex CLI's way (a turn.failed
	// line, then a crash without a result); "crash": an agent whose
	// crash message is the limit's text. Resets is how long after the first hit the
	// limit lasts (default defaultResets).
	Limit  string
	Resets time.Duration
	// Stall: the agent writes nothing (no transcript line, so edda writes
	// no event) for this long after its first line, then works as
	// directed. A redispatched plan's agents (REDISPATCH in the phase env)
	// do not stall.
	Stall time.Duration
	// Linger: the conductor stays alive this long after its plan's
	// plan_completed (the longest any phase's spec says).
	Linger time.Duration
}

func (s simSpec) failsAt(attempt int) bool {
	return s.FailN == always || attempt <= s.FailN
}

func (s simSpec) crashesAt(attempt int) bool {
	return s.CrashN == always || attempt <= s.CrashN
}

// directive is one `[sim ...]` group: ordered key/value pairs.
type directive struct {
	phase string // from phase=ID; "" = untargeted
	kv    [][2]string
}

// outcomeKeys are cleared by a higher-priority `pass`.
var outcomeKeys = []string{"fail", "crash", "die", "hang", "timeout", "budget", "maxturns", "skip", "limit"}

var knownKeys = map[string]bool{
	"pass": true, "fail": true, "crash": true, "die": true, "hang": true, "timeout": true,
	"budget": true, "maxturns": true, "skip": true, "reason": true, "delay": true, "cost": true,
	"error": true, "checks": true, "events": true, "child": true, "orphan": true, "strict": true, "phase": true, "edit": true,
	"limit": true, "resets": true, "stall": true, "linger": true, "tools": true,
}

// tokenize splits `a b=c d="e f"` honouring double quotes and \-escapes in them.
func tokenize(s string) ([]string, error) {
	var toks []string
	var cur strings.Builder
	inTok, inQuote := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			inQuote = !inQuote
			inTok = true
		case !inQuote && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			if inTok {
				toks = append(toks, cur.String())
				cur.Reset()
				inTok = false
			}
		default:
			cur.WriteByte(c)
			inTok = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inTok {
		toks = append(toks, cur.String())
	}
	return toks, nil
}

// parseGroup parses the inside of one directive (no brackets).
func parseGroup(body string) (directive, error) {
	toks, err := tokenize(body)
	if err != nil {
		return directive{}, err
	}
	var d directive
	for _, t := range toks {
		k, v, _ := strings.Cut(t, "=")
		if !knownKeys[k] {
			return directive{}, fmt.Errorf("unknown key %q", k)
		}
		if k == "pass" && v != "" {
			return directive{}, fmt.Errorf("pass takes no value, got pass=%q", v)
		}
		if k == "phase" {
			if v == "" {
				return directive{}, fmt.Errorf("phase= needs a phase id")
			}
			d.phase = v
			continue
		}
		d.kv = append(d.kv, [2]string{k, v})
	}
	return d, nil
}

// findDirectives extracts every `[sim ...]` block from free text. A `]`
// inside double quotes does not close the block.
func findDirectives(text string) ([]directive, error) {
	var out []directive
	rest := text
	for {
		i := strings.Index(rest, "[sim")
		if i < 0 {
			return out, nil
		}
		after := rest[i+4:]
		if after != "" && after[0] != ']' && after[0] != ' ' && after[0] != '\t' && after[0] != '\n' {
			rest = after // e.g. "[simple]" is not a directive
			continue
		}
		end, inQuote := -1, false
		for j := 0; j < len(after); j++ {
			switch c := after[j]; {
			case inQuote && c == '\\':
				j++
			case c == '"':
				inQuote = !inQuote
			case c == ']' && !inQuote:
				end = j
			}
			if end >= 0 {
				break
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("unterminated [sim directive")
		}
		d, err := parseGroup(after[:end])
		if err != nil {
			return nil, fmt.Errorf("[sim%s]: %w", after[:end], err)
		}
		out = append(out, d)
		rest = after[end+1:]
	}
}

// parseEnvScenario parses EDDASIM_SCENARIO: groups separated by `;`.
func parseEnvScenario(s string) ([]directive, error) {
	var out []directive
	for _, g := range strings.Split(s, ";") {
		if strings.TrimSpace(g) == "" {
			continue
		}
		d, err := parseGroup(g)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", scenarioEnv, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// scenario holds the resolved per-phase behaviour and plan-wide switches.
type scenario struct {
	phases map[string]simSpec
	strict bool
}

// resolveScenario layers, lowest priority first: EDDASIM_SCENARIO (untargeted,
// then phase=ID), the plan purpose (untargeted, then phase=ID), then the
// phase's own context and prompt. Later layers override earlier ones.
func resolveScenario(p *Plan, envValue string) (*scenario, error) {
	envDirs, err := parseEnvScenario(envValue)
	if err != nil {
		return nil, err
	}
	purposeDirs, err := findDirectives(p.Purpose)
	if err != nil {
		return nil, fmt.Errorf("plan purpose: %w", err)
	}
	for _, d := range purposeDirs {
		if d.phase != "" && p.phase(d.phase) == nil {
			return nil, fmt.Errorf("plan purpose: [sim phase=%s]: no such phase", d.phase)
		}
	}
	sc := &scenario{phases: map[string]simSpec{}}
	for _, d := range append(slices.Clone(envDirs), purposeDirs...) {
		for _, kv := range d.kv {
			if kv[0] == "strict" && d.phase == "" {
				sc.strict = true
			}
		}
	}
	for i := range p.Phases {
		ph := &p.Phases[i]
		acc := map[string]string{}
		apply := func(dirs []directive, targeted bool) {
			for _, d := range dirs {
				if (d.phase != "") != targeted || (targeted && d.phase != ph.ID) {
					continue
				}
				mergeGroup(acc, d)
			}
		}
		apply(envDirs, false)
		apply(envDirs, true)
		apply(purposeDirs, false)
		apply(purposeDirs, true)
		for _, text := range []string{ph.Context, ph.Prompt} {
			dirs, err := findDirectives(text)
			if err != nil {
				return nil, fmt.Errorf("phase %q: %w", ph.ID, err)
			}
			// A targeted directive in a phase's text (e.g. a purpose copied
			// into the first prompt) applies only to the phase it names.
			for _, d := range dirs {
				if d.phase == "" || d.phase == ph.ID {
					mergeGroup(acc, d)
				}
			}
		}
		spec, err := buildSpec(acc)
		if err != nil {
			return nil, fmt.Errorf("phase %q: %w", ph.ID, err)
		}
		sc.phases[ph.ID] = spec
	}
	return sc, nil
}

func mergeGroup(acc map[string]string, d directive) {
	for _, kv := range d.kv {
		if kv[0] == "pass" {
			for _, k := range outcomeKeys {
				delete(acc, k)
			}
			continue
		}
		acc[kv[0]] = kv[1]
	}
}

func parseCount(key, v string) (int, error) {
	if v == "" || v == "always" {
		return always, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a count >= 0 or \"always\"", key, v)
	}
	return n, nil
}

func noValue(key, v string) error {
	if v != "" {
		return fmt.Errorf("%s takes no value, got %s=%q", key, key, v)
	}
	return nil
}

func buildSpec(acc map[string]string) (simSpec, error) {
	cost := defaultCost
	s := simSpec{Delay: defaultDelay, Cost: &cost, Checks: "real", Resets: defaultResets}
	var err error
	for k, v := range acc {
		switch k {
		case "fail":
			s.FailN, err = parseCount(k, v)
		case "crash":
			s.CrashN, err = parseCount(k, v)
		case "die":
			s.DieAt = 1
			if v != "" {
				if s.DieAt, err = strconv.Atoi(v); err == nil && s.DieAt < 1 {
					err = fmt.Errorf("die=%q: want an attempt number >= 1", v)
				}
			}
		case "hang":
			switch v {
			case "":
				s.Hang = true
			case "forever":
				s.Hang, s.HangForever = true, true
			default:
				err = fmt.Errorf("hang=%q: want no value or \"forever\"", v)
			}
		case "timeout":
			s.Timeout, err = true, noValue(k, v)
		case "budget":
			s.Budget, err = true, noValue(k, v)
		case "maxturns":
			s.MaxTurns, err = true, noValue(k, v)
		case "skip":
			s.Skip, err = true, noValue(k, v)
		case "child":
			s.Child, err = true, noValue(k, v)
		case "orphan":
			s.Orphan, err = true, noValue(k, v)
		case "strict":
			err = noValue(k, v)
		case "reason":
			s.Reason = v
		case "error":
			s.Error = v
		case "delay":
			s.Delay, err = time.ParseDuration(v)
			if err == nil && s.Delay < 0 {
				err = fmt.Errorf("delay=%q: negative", v)
			}
		case "cost":
			if v == "null" {
				s.Cost = nil
			} else {
				var c float64
				c, err = strconv.ParseFloat(v, 64)
				s.Cost = &c
			}
		case "checks":
			if v != "real" && v != "pass" && v != "fail" {
				err = fmt.Errorf("checks=%q: want real, pass or fail", v)
			}
			s.Checks = v
		case "limit":
			switch v {
			case "", "fail":
				s.Limit = "fail"
			case "pass", "codex", "crash":
				s.Limit = v
			default:
				err = fmt.Errorf("limit=%q: want no value, fail, pass, codex or crash", v)
			}
		case "linger":
			s.Linger, err = time.ParseDuration(v)
			if err == nil && s.Linger <= 0 {
				err = fmt.Errorf("linger=%q: want a positive duration", v)
			}
		case "stall":
			s.Stall, err = time.ParseDuration(v)
			if err == nil && s.Stall <= 0 {
				err = fmt.Errorf("stall=%q: want a positive duration", v)
			}
		case "resets":
			s.Resets, err = time.ParseDuration(v)
			if err == nil && s.Resets <= 0 {
				err = fmt.Errorf("resets=%q: want a positive duration", v)
			}
		case "edit":
			s.Edit = v
			if v == "" || filepath.IsAbs(v) || strings.HasPrefix(filepath.Clean(v), "..") {
				err = fmt.Errorf("edit=%q: want a path inside the plan's cwd", v)
			}
		case "events":
			s.Events, err = strconv.Atoi(v)
			if err == nil && s.Events < 0 {
				err = fmt.Errorf("events=%q: negative", v)
			}
		case "tools":
			s.Tools, err = strconv.Atoi(v)
			if err == nil && (s.Tools < 0 || s.Tools > 1000) {
				err = fmt.Errorf("tools=%q: want 0 to 1000", v)
			}
		}
		if err != nil {
			return simSpec{}, fmt.Errorf("directive %s: %w", k, err)
		}
	}
	return s, nil
}

func envScenario() string { return os.Getenv(scenarioEnv) }
