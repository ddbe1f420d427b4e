package mapping

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"karvi-edda-temporal/dag"
)

// Check types edda's conductor knows (plan/schema.rs CheckSpec).
const (
	CheckFileExists   = "file_exists"
	CheckCmdSucceeds  = "cmd_succeeds"
	CheckFileContains = "file_contains"
	CheckGitClean     = "git_clean"
	CheckEddaEvent    = "edda_event"
	CheckWaitUntil    = "wait_until"
)

// on_fail values edda accepts (snake_case OnFail).
const (
	OnFailAutoRetry = "auto_retry"
	OnFailAsk       = "ask"
	OnFailSkip      = "skip"
	OnFailAbort     = "abort"
)

var (
	// planNamePattern is edda's is_kebab_case: a lowercase letter or digit,
	// then lowercase letters, digits and hyphens.
	planNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	// phaseIDPattern is stricter than edda (which only demands uniqueness):
	// phase ids become brief keys, log text and edda session paths, so keep
	// them to a safe, bounded alphabet.
	phaseIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
)

// Check is one edda check. Which fields matter depends on Type; the rest stay
// zero and are omitted from the YAML.
type Check struct {
	Type           string `yaml:"type"`
	Path           string `yaml:"path,omitempty"`
	Pattern        string `yaml:"pattern,omitempty"`
	Cmd            string `yaml:"cmd,omitempty"`
	TimeoutSec     int    `yaml:"timeout_sec,omitempty"`
	AllowUntracked *bool  `yaml:"allow_untracked,omitempty"`
	EventType      string `yaml:"event_type,omitempty"`
	After          string `yaml:"after,omitempty"`
	// wait_until: the inner check and its polling.
	Check       *Check `yaml:"check,omitempty"`
	IntervalSec int    `yaml:"interval_sec,omitempty"`
	Backoff     string `yaml:"backoff,omitempty"`
}

// checkFields is Check without its UnmarshalYAML, to decode the tagged form.
type checkFields Check

// UnmarshalYAML accepts the tagged form (`{type: cmd_succeeds, cmd: ...}`)
// and edda's short form (`cmd_succeeds: "cargo test"`), normalising the
// short form exactly as edda's parser does.
func (c *Check) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("check must be a mapping, got %s", nodeKind(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "type" {
			var f checkFields
			if err := n.Decode(&f); err != nil {
				return err
			}
			*c = Check(f)
			return nil
		}
	}
	if len(n.Content) != 2 {
		return fmt.Errorf("short-form check must have exactly one key, got %d", len(n.Content)/2)
	}
	key, val := n.Content[0], n.Content[1]
	if key.Kind != yaml.ScalarNode {
		return errors.New("check key must be a string")
	}
	out := Check{Type: key.Value}
	switch key.Value {
	case CheckCmdSucceeds, CheckFileExists:
		if val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
			return fmt.Errorf("%s value must be a string", key.Value)
		}
		if key.Value == CheckCmdSucceeds {
			out.Cmd = val.Value
		} else {
			out.Path = val.Value
		}
	case CheckFileContains:
		if val.Kind != yaml.MappingNode {
			return errors.New("file_contains value must be a mapping")
		}
		if err := decodeInto(val, &out); err != nil {
			return err
		}
	case CheckGitClean:
		// `git_clean: true` and `git_clean: {allow_untracked: true}` both
		// mean a git_clean check; edda ignores a scalar's value.
		if val.Kind == yaml.MappingNode {
			if err := decodeInto(val, &out); err != nil {
				return err
			}
		}
	case CheckEddaEvent:
		switch {
		case val.Kind == yaml.MappingNode:
			if err := decodeInto(val, &out); err != nil {
				return err
			}
		case val.Kind == yaml.ScalarNode && val.Tag != "!!null":
			out.EventType = val.Value
		default:
			return errors.New("edda_event value must be string or mapping")
		}
	default:
		return fmt.Errorf("unknown check type %q (known: %s)", key.Value, strings.Join(knownCheckTypes, ", "))
	}
	*c = out
	return nil
}

// decodeInto decodes a short-form check's mapping value on top of out while
// keeping the type the key named.
func decodeInto(val *yaml.Node, out *Check) error {
	typ := out.Type
	var f checkFields
	if err := val.Decode(&f); err != nil {
		return err
	}
	*out = Check(f)
	out.Type = typ
	return nil
}

var knownCheckTypes = []string{CheckCmdSucceeds, CheckFileExists, CheckFileContains, CheckGitClean, CheckEddaEvent, CheckWaitUntil}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		return "a scalar"
	case yaml.AliasNode:
		return "an alias"
	}
	return "something else"
}

// Phase is one edda phase. prompt is always written: edda requires the key.
type Phase struct {
	ID             string            `yaml:"id"`
	Prompt         string            `yaml:"prompt"`
	Cwd            string            `yaml:"cwd,omitempty"`
	DependsOn      []string          `yaml:"depends_on,omitempty,flow"`
	Check          []Check           `yaml:"check,omitempty"`
	MaxAttempts    int               `yaml:"max_attempts,omitempty"`
	TimeoutSec     int               `yaml:"timeout_sec,omitempty"`
	OnFail         string            `yaml:"on_fail,omitempty"`
	Context        string            `yaml:"context,omitempty"`
	Env            map[string]string `yaml:"env,omitempty"`
	BudgetUSD      *float64          `yaml:"budget_usd,omitempty"`
	AllowedTools   []string          `yaml:"allowed_tools,omitempty"`
	PermissionMode string            `yaml:"permission_mode,omitempty"`
}

// Plan is edda's plan.yaml.
type Plan struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description,omitempty"`
	Purpose     string            `yaml:"purpose,omitempty"`
	Cwd         string            `yaml:"cwd,omitempty"`
	BudgetUSD   *float64          `yaml:"budget_usd,omitempty"`
	MaxAttempts int               `yaml:"max_attempts,omitempty"`
	TimeoutSec  int               `yaml:"timeout_sec,omitempty"`
	OnFail      string            `yaml:"on_fail,omitempty"`
	Env         map[string]string `yaml:"env,omitempty"`
	Tags        []string          `yaml:"tags,omitempty"`
	Phases      []Phase           `yaml:"phases"`
}

// PlanSummary is the part of a plan the workflow keeps: small enough for
// history, enough for the brief skeleton and the outcome wording.
type PlanSummary struct {
	Name        string   `json:"name"`
	PhaseIDs    []string `json:"phaseIds"`
	TimeoutSec  int      `json:"timeoutSec,omitempty"`
	MaxAttempts int      `json:"maxAttempts,omitempty"`
	BudgetUSD   *float64 `json:"budgetUsd,omitempty"`
	// Redispatch is true for a plan built for a redispatch (REDISPATCH=1):
	// NewBriefState then makes InitPatch reset what the earlier attempt left
	// in karvi's brief.
	Redispatch bool `json:"redispatch,omitempty"`
}

// Summary extracts the PlanSummary.
func (p Plan) Summary() PlanSummary {
	ids := make([]string, len(p.Phases))
	for i, ph := range p.Phases {
		ids[i] = ph.ID
	}
	var budget *float64
	if p.BudgetUSD != nil {
		b := *p.BudgetUSD
		budget = &b
	}
	return PlanSummary{
		Name:        p.Name,
		PhaseIDs:    ids,
		TimeoutSec:  p.TimeoutSec,
		MaxAttempts: p.MaxAttempts,
		BudgetUSD:   budget,
		Redispatch:  p.Env[redispatchEnv] == "1",
	}
}

// PlanError names the plan field that breaks one of edda's rules.
type PlanError struct {
	Field   string
	Problem string
}

func (e *PlanError) Error() string {
	if e.Field == "" {
		return "plan: " + e.Problem
	}
	return "plan: " + e.Field + ": " + e.Problem
}

// Validate applies edda's plan rules (plan/parser.rs validate_plan plus what
// its serde schema rejects) and a few of our own that keep the brief sane:
// every phase needs a non-empty prompt and a phase id from phaseIDPattern.
func (p Plan) Validate() error {
	if !planNamePattern.MatchString(p.Name) {
		return &PlanError{Field: "name", Problem: fmt.Sprintf("%q must be kebab-case (lowercase letters, digits, hyphens)", p.Name)}
	}
	if err := checkOnFail("on_fail", p.OnFail); err != nil {
		return err
	}
	if err := checkLimits("", p.MaxAttempts, p.TimeoutSec, p.BudgetUSD); err != nil {
		return err
	}
	return validatePhases(p.Phases, true)
}

// validatePhases holds the phase rules plans and templates share. Templates
// may leave a prompt empty (BuildPlan fills in the message).
func validatePhases(phases []Phase, needPrompt bool) error {
	if len(phases) == 0 {
		return &PlanError{Field: "phases", Problem: "must have at least one phase"}
	}
	index := make(map[string]int, len(phases))
	for i, ph := range phases {
		f := fmt.Sprintf("phases[%d]", i)
		if ph.ID == "" {
			return &PlanError{Field: f + ".id", Problem: "required"}
		}
		if !phaseIDPattern.MatchString(ph.ID) {
			return &PlanError{Field: f + ".id", Problem: fmt.Sprintf("%q must be 1-64 characters of A-Z a-z 0-9 _ - starting with a letter or digit", ph.ID)}
		}
		if _, dup := index[ph.ID]; dup {
			return &PlanError{Field: f + ".id", Problem: fmt.Sprintf("duplicate phase id %q", ph.ID)}
		}
		index[ph.ID] = i
	}
	for i, ph := range phases {
		f := fmt.Sprintf("phases[%d]", i)
		if needPrompt && strings.TrimSpace(ph.Prompt) == "" {
			return &PlanError{Field: f + ".prompt", Problem: "required"}
		}
		for _, dep := range ph.DependsOn {
			if _, ok := index[dep]; !ok {
				return &PlanError{Field: f + ".depends_on", Problem: fmt.Sprintf("phase %q depends on %q which does not exist", ph.ID, dep)}
			}
		}
		if err := checkOnFail(f+".on_fail", ph.OnFail); err != nil {
			return err
		}
		if err := checkLimits(f+".", ph.MaxAttempts, ph.TimeoutSec, ph.BudgetUSD); err != nil {
			return err
		}
		for j, tool := range ph.AllowedTools {
			if strings.TrimSpace(tool) == "" {
				return &PlanError{Field: fmt.Sprintf("%s.allowed_tools[%d]", f, j), Problem: "must not be empty"}
			}
		}
		for j := range ph.Check {
			if err := validateCheck(fmt.Sprintf("%s.check[%d]", f, j), ph.Check[j], false); err != nil {
				return err
			}
		}
	}
	if cyc := findCycle(phases, index); cyc != nil {
		return &PlanError{Field: "phases", Problem: "dependency cycle: " + strings.Join(cyc, " -> ")}
	}
	return nil
}

func checkOnFail(field, v string) error {
	switch v {
	case "", OnFailAutoRetry, OnFailAsk, OnFailSkip, OnFailAbort:
		return nil
	}
	return &PlanError{Field: field, Problem: fmt.Sprintf("%q must be one of auto_retry, ask, skip, abort", v)}
}

// checkLimits mirrors edda's unsigned integer fields and rejects budgets
// YAML can express but a budget cannot be.
func checkLimits(prefix string, maxAttempts, timeoutSec int, budget *float64) error {
	if maxAttempts < 0 {
		return &PlanError{Field: prefix + "max_attempts", Problem: fmt.Sprintf("%d must not be negative", maxAttempts)}
	}
	if timeoutSec < 0 {
		return &PlanError{Field: prefix + "timeout_sec", Problem: fmt.Sprintf("%d must not be negative", timeoutSec)}
	}
	if budget != nil && (math.IsNaN(*budget) || math.IsInf(*budget, 0) || *budget < 0) {
		return &PlanError{Field: prefix + "budget_usd", Problem: fmt.Sprintf("%v must be a finite, non-negative amount", *budget)}
	}
	return nil
}

func validateCheck(field string, c Check, nested bool) error {
	need := func(name, v string) error {
		if strings.TrimSpace(v) == "" {
			return &PlanError{Field: field + "." + name, Problem: "required for a " + c.Type + " check"}
		}
		return nil
	}
	if c.TimeoutSec < 0 {
		return &PlanError{Field: field + ".timeout_sec", Problem: "must not be negative"}
	}
	switch c.Type {
	case CheckFileExists:
		return need("path", c.Path)
	case CheckCmdSucceeds:
		return need("cmd", c.Cmd)
	case CheckFileContains:
		if err := need("path", c.Path); err != nil {
			return err
		}
		return need("pattern", c.Pattern)
	case CheckGitClean:
		return nil
	case CheckEddaEvent:
		return need("event_type", c.EventType)
	case CheckWaitUntil:
		if nested {
			return &PlanError{Field: field, Problem: "wait_until cannot nest another wait_until"}
		}
		if c.Check == nil {
			return &PlanError{Field: field + ".check", Problem: "required for a wait_until check"}
		}
		if c.IntervalSec < 0 {
			return &PlanError{Field: field + ".interval_sec", Problem: "must not be negative"}
		}
		switch c.Backoff {
		case "", "none", "linear", "exponential":
		default:
			return &PlanError{Field: field + ".backoff", Problem: fmt.Sprintf("%q must be none, linear or exponential", c.Backoff)}
		}
		return validateCheck(field+".check", *c.Check, true)
	case "":
		return &PlanError{Field: field + ".type", Problem: "required"}
	}
	return &PlanError{Field: field + ".type", Problem: fmt.Sprintf("unknown check type %q (known: %s)", c.Type, strings.Join(knownCheckTypes, ", "))}
}

// findCycle returns one dependency cycle as phase ids, or nil. It walks
// phases in plan order so the reported cycle is deterministic.
func findCycle(phases []Phase, index map[string]int) []string {
	ids := make([]string, len(phases))
	for i, ph := range phases {
		ids[i] = ph.ID
	}
	return dag.Cycle(ids, func(i int) []int {
		var out []int
		for _, dep := range phases[i].DependsOn {
			if j, ok := index[dep]; ok {
				out = append(out, j)
			}
		}
		return out
	})
}

// MarshalPlan renders plan.yaml through the YAML encoder, so any message
// (quotes, colons, '#', '{{', newlines, unicode) is escaped by construction.
func MarshalPlan(p Plan) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encode plan %q: %w", p.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode plan %q: %w", p.Name, err)
	}
	return buf.Bytes(), nil
}

// ParsePlan decodes plan.yaml (tagged or short-form checks, unknown keys
// ignored as edda does) and validates it.
func ParsePlan(data []byte) (Plan, error) {
	var p Plan
	if err := yaml.Unmarshal(data, &p); err != nil {
		return Plan{}, fmt.Errorf("plan: invalid YAML: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// PlanName derives the edda plan name for a karvi task and attempt:
// "karvi-" + the task id in kebab-case, plus a short hash of the original id
// whenever the kebab form is not the id itself (so "T5" and "t5" never share
// a state directory) or could be mistaken for one of our suffixes, plus
// "-rN" for attempt N > 1 (a redispatch needs a fresh name: edda resumes an
// existing one). attempt <= 1 means the first attempt.
//
// This is the name of an attempt without a chain nonce: attempts of task
// workflows started before attempts carried one (AttemptPlanName).
func PlanName(taskID string, attempt int) string {
	name := planPrefix(taskID)
	if attempt > 1 {
		name += "-r" + strconv.Itoa(attempt)
	}
	return name
}

// AttemptPlanName is the plan name of attempt N of a task made by the
// workflow chain whose nonce is given (AttemptNonce):
// "karvi-<task>-rN-<nonce>". The name is the attempt's identity: its run
// directory, its conductor state directory and its agent slot are all
// keyed by it, so a later workflow of the same task, which numbers its
// attempts from wherever it starts, never lands on an earlier chain's
// attempt. An empty nonce gives PlanName's name.
func AttemptPlanName(taskID string, attempt int, nonce string) string {
	if nonce == "" {
		return PlanName(taskID, attempt)
	}
	return planPrefix(taskID) + "-r" + strconv.Itoa(max(attempt, 1)) + "-" + nonce
}

// AttemptNonce is the 8 hex digits that tell a task workflow chain's
// attempts from every other chain's: a hash of the workflow id and the
// chain's first run id, which continue-as-new keeps. "" when both are
// empty.
func AttemptNonce(workflowID, firstRunID string) string {
	if workflowID == "" && firstRunID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(workflowID + "\x00" + firstRunID))
	return hex.EncodeToString(sum[:4])
}

// planPrefix is "karvi-" and the task id's kebab form, hashed when needed.
func planPrefix(taskID string) string {
	kebab := KebabCase(taskID)
	parts := []string{"karvi"}
	if kebab != "" {
		parts = append(parts, kebab)
	}
	if kebab != taskID || looksLikeSuffix(kebab) {
		sum := sha256.Sum256([]byte(taskID))
		parts = append(parts, hex.EncodeToString(sum[:])[:6])
	}
	return strings.Join(parts, "-")
}

var (
	attemptSuffix = regexp.MustCompile(`(^|-)r[0-9]+$`)
	hashSuffix    = regexp.MustCompile(`(^|-)[0-9a-f]{6}$`)
	nonceSuffix   = regexp.MustCompile(`(^|-)r[0-9]+-[0-9a-f]{8}$`)
)

// looksLikeSuffix reports a kebab id whose last segments have the shape of
// an attempt ("r2"), hash or attempt-and-nonce suffix; hashing those keeps
// task "t5-r2" apart from task "t5" attempt 2.
func looksLikeSuffix(kebab string) bool {
	return attemptSuffix.MatchString(kebab) || hashSuffix.MatchString(kebab) || nonceSuffix.MatchString(kebab)
}

// KebabCase lowercases s and keeps ASCII letters and digits, one dash for
// each run of anything else: the names edda accepts. Callers that must keep
// distinct inputs apart add a hash when it changed the input, as PlanName
// does.
func KebabCase(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}

const redispatchEnv = "REDISPATCH"

// ModelEnv carries the dispatch's modelHint to the agent of every phase:
// edda's plan has no model field, and the agent it runs (Claude Code) picks
// its model from this variable, aliases such as "sonnet" and "opus" included.
const ModelEnv = "ANTHROPIC_MODEL"

// BuildPlan turns a dispatch into the plan for one attempt
// (docs/contract.md §3). Limits and env are repeated on every phase because
// edda ignores the plan-level ones at run time. A template phase's own
// timeout_sec or max_attempts wins over the dispatch's: an operator who set
// one meant it.
func BuildPlan(d DispatchPlan, attempt int, t Template) (Plan, error) {
	return BuildAttemptPlan(d, attempt, "", t)
}

// BuildAttemptPlan is BuildPlan for the attempt of the workflow chain with
// the given nonce: its plan is named AttemptPlanName(task, attempt, nonce).
func BuildAttemptPlan(d DispatchPlan, attempt int, nonce string, t Template) (Plan, error) {
	if err := d.Validate(); err != nil {
		return Plan{}, err
	}
	if err := t.Validate(); err != nil {
		return Plan{}, fmt.Errorf("template %q: %w", t.Name, err)
	}
	timeout := d.EffectiveTimeoutSec()
	maxAttempts := d.EffectiveMaxAttempts()
	redispatch := d.IsRedispatch() || attempt > 1

	p := Plan{
		Name:        AttemptPlanName(d.TaskID, attempt, nonce),
		Purpose:     promptText(d.Message),
		MaxAttempts: maxAttempts,
		TimeoutSec:  timeout,
		Tags:        []string{"karvi:" + d.TaskID},
	}
	if d.PlanID != "" {
		p.Tags = append(p.Tags, "dispatch:"+d.PlanID)
	}
	env := map[string]string{}
	if redispatch {
		env[redispatchEnv] = "1"
	}
	if d.ModelHint != nil && strings.TrimSpace(*d.ModelHint) != "" {
		env[ModelEnv] = strings.TrimSpace(*d.ModelHint)
	}
	if len(env) > 0 {
		p.Env = env
	}
	skills := cleanSkills(d.RequiredSkills)
	upstream := upstreamContext(d.Artifacts)

	p.Phases = make([]Phase, len(t.Phases))
	for i, tp := range t.Phases {
		ph := clonePhase(tp)
		if strings.TrimSpace(ph.Prompt) == "" {
			ph.Prompt = d.Message
		}
		ph.Prompt = promptText(ph.Prompt)
		if ph.TimeoutSec == 0 {
			ph.TimeoutSec = timeout
		}
		if ph.MaxAttempts == 0 {
			ph.MaxAttempts = maxAttempts
		}
		for k, v := range env {
			if ph.Env == nil {
				ph.Env = map[string]string{}
			}
			if _, set := ph.Env[k]; !set || k == redispatchEnv {
				ph.Env[k] = v
			}
		}
		ph.AllowedTools = appendUnique(ph.AllowedTools, skills)
		if i == 0 && upstream != "" {
			if strings.TrimSpace(ph.Context) == "" {
				ph.Context = upstream
			} else {
				ph.Context = strings.TrimRight(ph.Context, "\n") + "\n\n" + upstream
			}
		}
		ph.Context = promptText(ph.Context)
		p.Phases[i] = ph
	}
	if err := p.Validate(); err != nil {
		return Plan{}, fmt.Errorf("built plan is invalid: %w", err)
	}
	return p, nil
}

// promptText drops leading blank lines (empty, or only spaces and tabs),
// and the spaces and tabs that open the first line when it starts with a
// tab, from text placed in the plan. They mean nothing to an agent, and
// yaml.v3 writes such a string as a block scalar that loses them ("\n0"
// reads back as "0") or cannot be read back at all ("\t0": "found a tab
// character where an indentation space is expected"), both found by
// FuzzPlanRoundTrip, so plan.yaml would not say what was built.
func promptText(s string) string {
	for {
		line, rest, found := strings.Cut(s, "\n")
		if !found || strings.Trim(line, " \t\r") != "" {
			break
		}
		s = rest
	}
	if strings.HasPrefix(s, "\t") {
		s = strings.TrimLeft(s, " \t")
	}
	return s
}

// upstreamContext renders the artifacts that carry a summary, one line each,
// under an "## Upstream Context" heading.
func upstreamContext(arts []Artifact) string {
	var lines []string
	for _, a := range arts {
		summary := oneLine(a.Summary)
		if summary == "" {
			continue
		}
		title := oneLine(a.Title)
		if title != "" {
			lines = append(lines, fmt.Sprintf("%s (%s): %s", oneLine(a.ID), title, summary))
		} else {
			lines = append(lines, fmt.Sprintf("%s: %s", oneLine(a.ID), summary))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "## Upstream Context\n" + strings.Join(lines, "\n") + "\n"
}

// oneLine folds line breaks so each artifact stays on its own line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func cleanSkills(skills []string) []string {
	var out []string
	for _, s := range skills {
		if s = strings.TrimSpace(s); s != "" {
			out = appendUnique(out, []string{s})
		}
	}
	return out
}

func appendUnique(dst, add []string) []string {
	for _, s := range add {
		found := false
		for _, d := range dst {
			if d == s {
				found = true
				break
			}
		}
		if !found {
			dst = append(dst, s)
		}
	}
	return dst
}

// clonePhase deep-copies a template phase so building a plan never aliases
// the template's slices and maps.
func clonePhase(p Phase) Phase {
	out := p
	out.DependsOn = append([]string(nil), p.DependsOn...)
	out.AllowedTools = append([]string(nil), p.AllowedTools...)
	if p.Check != nil {
		out.Check = make([]Check, len(p.Check))
		for i, c := range p.Check {
			out.Check[i] = cloneCheck(c)
		}
	}
	out.Env = maps.Clone(p.Env)
	if p.BudgetUSD != nil {
		b := *p.BudgetUSD
		out.BudgetUSD = &b
	}
	return out
}

func cloneCheck(c Check) Check {
	out := c
	if c.AllowUntracked != nil {
		b := *c.AllowUntracked
		out.AllowUntracked = &b
	}
	if c.Check != nil {
		inner := cloneCheck(*c.Check)
		out.Check = &inner
	}
	return out
}

// IsAttemptPlan says whether name is the plan name of the task's attempt
// of that number, made by any workflow chain (with or without a nonce):
// for tools that look for an attempt's files without knowing its chain.
func IsAttemptPlan(name, taskID string, attempt int) bool {
	if name == PlanName(taskID, attempt) {
		return true
	}
	if len(name) < 9 || name[len(name)-9] != '-' {
		return false
	}
	nonce := name[len(name)-8:]
	return strings.Trim(nonce, "0123456789abcdef") == "" && name == AttemptPlanName(taskID, attempt, nonce)
}
