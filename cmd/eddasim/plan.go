package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// OnFail is a phase failure policy, spelled as in plan.yaml.
type OnFail string

const (
	OnFailAutoRetry OnFail = "auto_retry"
	OnFailAsk       OnFail = "ask"
	OnFailSkip      OnFail = "skip"
	OnFailAbort     OnFail = "abort"
)

// Defaults of edda's plan schema.
const (
	defaultMaxAttempts     = 3
	defaultTimeoutSec      = 1800
	defaultCmdTimeoutSec   = 120
	defaultWaitIntervalSec = 30
	defaultWaitTimeoutSec  = 600
)

// Plan is the simulator's own model of an edda plan.yaml.
type Plan struct {
	Name        string
	Description string
	Purpose     string
	Cwd         string // "" when absent
	BudgetUSD   *float64
	MaxAttempts int
	TimeoutSec  int64
	OnFail      OnFail
	Env         map[string]string
	Tags        []string
	Phases      []Phase
}

// Phase is one phase of a plan.
type Phase struct {
	ID          string
	Prompt      string
	Cwd         string
	DependsOn   []string
	Check       []CheckSpec
	MaxAttempts *int
	TimeoutSec  *int64
	OnFail      *OnFail
	Context     string
	Env         map[string]string
	BudgetUSD   *float64
}

// CheckSpec is one entry of a phase's check list, normalised to the tagged form.
type CheckSpec struct {
	Type           string
	Path           string
	Pattern        string
	Cmd            string
	TimeoutSec     int64
	AllowUntracked bool
	EventType      string
	After          string
	Inner          *CheckSpec
	IntervalSec    int64
	Backoff        string
}

// retryable mirrors edda: a wait_until failure already retried internally.
func (c CheckSpec) retryable() bool { return c.Type != "wait_until" }

func (p *Plan) phase(id string) *Phase {
	for i := range p.Phases {
		if p.Phases[i].ID == id {
			return &p.Phases[i]
		}
	}
	return nil
}

func (p *Plan) maxAttempts(ph *Phase) int {
	if ph.MaxAttempts != nil {
		return *ph.MaxAttempts
	}
	return p.MaxAttempts
}

func (p *Plan) onFail(ph *Phase) OnFail {
	if ph.OnFail != nil {
		return *ph.OnFail
	}
	return p.OnFail
}

// agentTimeoutSec is the launcher's timer: the phase's own timeout_sec or
// 1800; edda ignores the plan-level value here.
func agentTimeoutSec(ph *Phase) int64 {
	if ph.TimeoutSec != nil {
		return *ph.TimeoutSec
	}
	return defaultTimeoutSec
}

// staleTimeoutSec is what resume-time stale detection uses: phase, then plan.
func (p *Plan) staleTimeoutSec(ph *Phase) int64 {
	if ph != nil && ph.TimeoutSec != nil {
		return *ph.TimeoutSec
	}
	return p.TimeoutSec
}

// planError is a user-facing validation error; main prints it edda-style.
type planError struct {
	msg   string
	cause error
}

func (e *planError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + e.cause.Error()
	}
	return e.msg
}

func (e *planError) Unwrap() error { return e.cause }

func planErrorf(format string, args ...any) error {
	return &planError{msg: fmt.Sprintf(format, args...)}
}

// loadPlan reads and validates a plan file the way `edda conduct run` does.
func loadPlan(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &planError{msg: "reading " + path, cause: err}
	}
	return parsePlan(data)
}

var validCheckTypes = []string{"cmd_succeeds", "file_exists", "file_contains", "git_clean", "edda_event", "wait_until"}

// parsePlan parses YAML, normalises short-form checks, expands
// ${{ env.X }} and validates the constraints edda enforces.
func parsePlan(data []byte) (*Plan, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &planError{msg: "invalid YAML syntax", cause: err}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, planErrorf("plan schema validation failed: empty document")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, planErrorf("plan schema validation failed: plan must be a mapping")
	}
	if err := normalizeChecks(root); err != nil {
		return nil, err
	}
	expandVariables(root)

	plan, err := decodePlan(root)
	if err != nil {
		return nil, err
	}
	if err := validatePlan(plan); err != nil {
		return nil, err
	}
	return plan, nil
}

func mapGet(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

// normalizeChecks rewrites `- cmd_succeeds: "x"` into `{type: cmd_succeeds, cmd: "x"}`.
func normalizeChecks(root *yaml.Node) error {
	phases := mapGet(root, "phases")
	if phases == nil || phases.Kind != yaml.SequenceNode {
		return nil
	}
	for _, ph := range phases.Content {
		checks := mapGet(ph, "check")
		if checks == nil || checks.Kind != yaml.SequenceNode {
			continue
		}
		for i, c := range checks.Content {
			n, err := normalizeOneCheck(c)
			if err != nil {
				return err
			}
			if n != nil {
				checks.Content[i] = n
			}
		}
	}
	return nil
}

func normalizeOneCheck(c *yaml.Node) (*yaml.Node, error) {
	if c.Kind != yaml.MappingNode {
		return nil, planErrorf("check must be a mapping, got: %q", c.Value)
	}
	if mapGet(c, "type") != nil {
		return nil, nil
	}
	if len(c.Content) != 2 {
		return nil, planErrorf("short-format check must have exactly one key, got %d", len(c.Content)/2)
	}
	key, val := c.Content[0].Value, c.Content[1]
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	add := func(k string, v *yaml.Node) { out.Content = append(out.Content, scalar("!!str", k), v) }
	add("type", scalar("!!str", key))
	switch key {
	case "cmd_succeeds", "file_exists":
		if val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
			return nil, planErrorf("%s value must be a string", key)
		}
		field := "cmd"
		if key == "file_exists" {
			field = "path"
		}
		add(field, scalar("!!str", val.Value))
	case "file_contains":
		if val.Kind != yaml.MappingNode {
			return nil, planErrorf("file_contains value must be a mapping")
		}
		out.Content = append(out.Content, val.Content...)
	case "git_clean":
		// `git_clean: true` carries no fields; a mapping carries allow_untracked.
		if val.Kind == yaml.MappingNode {
			out.Content = append(out.Content, val.Content...)
		}
	case "edda_event":
		switch {
		case val.Kind == yaml.MappingNode:
			out.Content = append(out.Content, val.Content...)
		case val.Kind == yaml.ScalarNode && val.Tag != "!!null":
			add("event_type", scalar("!!str", val.Value))
		default:
			return nil, planErrorf("edda_event value must be string or mapping")
		}
	default:
		return nil, planErrorf("unknown check type: %q. Valid types: %s", key, strings.Join(validCheckTypes, ", "))
	}
	return out, nil
}

// expandVariables replaces ${{ env.NAME }} in every string scalar.
func expandVariables(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		if (n.Tag == "!!str" || n.Tag == "") && strings.Contains(n.Value, "${{") {
			n.Value = expandEnvVars(n.Value)
		}
		return
	}
	for _, c := range n.Content {
		expandVariables(c)
	}
}

func expandEnvVars(s string) string {
	var b strings.Builder
	rest := s
	for {
		start := strings.Index(rest, "${{")
		if start < 0 {
			break
		}
		b.WriteString(rest[:start])
		after := rest[start+3:]
		end := strings.Index(after, "}}")
		if end < 0 {
			b.WriteString(rest[start:])
			rest = ""
			break
		}
		expr := strings.TrimSpace(after[:end])
		if name, ok := strings.CutPrefix(expr, "env."); ok {
			b.WriteString(os.Getenv(strings.TrimSpace(name)))
		} else {
			b.WriteString(rest[start : start+3+end+2])
		}
		rest = after[end+2:]
	}
	b.WriteString(rest)
	return b.String()
}

type rawPlan struct {
	Name        *string           `yaml:"name"`
	Description *string           `yaml:"description"`
	Purpose     *string           `yaml:"purpose"`
	Cwd         *string           `yaml:"cwd"`
	BudgetUSD   *float64          `yaml:"budget_usd"`
	MaxAttempts *int              `yaml:"max_attempts"`
	TimeoutSec  *int64            `yaml:"timeout_sec"`
	OnFail      *string           `yaml:"on_fail"`
	Env         map[string]string `yaml:"env"`
	Tags        []string          `yaml:"tags"`
	Phases      *[]yaml.Node      `yaml:"phases"`
}

type rawPhase struct {
	ID          *string           `yaml:"id"`
	Prompt      *string           `yaml:"prompt"`
	Cwd         *string           `yaml:"cwd"`
	DependsOn   []string          `yaml:"depends_on"`
	Check       []yaml.Node       `yaml:"check"`
	MaxAttempts *int              `yaml:"max_attempts"`
	TimeoutSec  *int64            `yaml:"timeout_sec"`
	OnFail      *string           `yaml:"on_fail"`
	Context     *string           `yaml:"context"`
	Env         map[string]string `yaml:"env"`
	BudgetUSD   *float64          `yaml:"budget_usd"`
}

type rawCheck struct {
	Type           *string `yaml:"type"`
	Path           *string `yaml:"path"`
	Pattern        *string `yaml:"pattern"`
	Cmd            *string `yaml:"cmd"`
	TimeoutSec     *int64  `yaml:"timeout_sec"`
	AllowUntracked *bool   `yaml:"allow_untracked"`
	EventType      *string `yaml:"event_type"`
	After          *string `yaml:"after"`
	// A value, not a pointer: yaml.v3 leaves a *yaml.Node field empty.
	Check       yaml.Node `yaml:"check"`
	IntervalSec *int64    `yaml:"interval_sec"`
	Backoff     *string   `yaml:"backoff"`
}

func schemaErr(err error) error {
	return &planError{msg: "plan schema validation failed", cause: err}
}

func schemaErrf(format string, args ...any) error {
	return schemaErr(fmt.Errorf(format, args...))
}

func parseOnFail(s *string) (*OnFail, error) {
	if s == nil {
		return nil, nil
	}
	v := OnFail(*s)
	switch v {
	case OnFailAutoRetry, OnFailAsk, OnFailSkip, OnFailAbort:
		return &v, nil
	}
	return nil, schemaErrf("unknown variant `%s`, expected one of `auto_retry`, `ask`, `skip`, `abort`", *s)
}

func nonNegative(field string, v *int64) error {
	if v != nil && *v < 0 {
		return schemaErrf("%s: invalid value: integer `%d`, expected u64", field, *v)
	}
	return nil
}

// checkEnvStrings rejects non-string env values: edda's env maps are
// string-to-string, so an unquoted `REDISPATCH: 1` does not deserialize.
func checkEnvStrings(where string, m *yaml.Node) error {
	env := mapGet(m, "env")
	if env == nil || env.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(env.Content); i += 2 {
		v := env.Content[i+1]
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			return schemaErrf("%s env.%s: invalid type: expected a string (quote the value)", where, env.Content[i].Value)
		}
	}
	return nil
}

func decodePlan(root *yaml.Node) (*Plan, error) {
	var rp rawPlan
	if err := root.Decode(&rp); err != nil {
		return nil, schemaErr(err)
	}
	if rp.Name == nil {
		return nil, schemaErrf("missing field `name`")
	}
	if rp.Phases == nil {
		return nil, schemaErrf("missing field `phases`")
	}
	if err := checkEnvStrings("plan", root); err != nil {
		return nil, err
	}
	p := &Plan{
		Name:        *rp.Name,
		MaxAttempts: defaultMaxAttempts,
		TimeoutSec:  defaultTimeoutSec,
		OnFail:      OnFailAutoRetry,
		Env:         rp.Env,
		Tags:        rp.Tags,
		BudgetUSD:   rp.BudgetUSD,
	}
	if rp.Description != nil {
		p.Description = *rp.Description
	}
	if rp.Purpose != nil {
		p.Purpose = *rp.Purpose
	}
	if rp.Cwd != nil {
		p.Cwd = *rp.Cwd
	}
	if rp.MaxAttempts != nil {
		if *rp.MaxAttempts < 0 {
			return nil, schemaErrf("max_attempts: invalid value: integer `%d`, expected u32", *rp.MaxAttempts)
		}
		p.MaxAttempts = *rp.MaxAttempts
	}
	if err := nonNegative("timeout_sec", rp.TimeoutSec); err != nil {
		return nil, err
	}
	if rp.TimeoutSec != nil {
		p.TimeoutSec = *rp.TimeoutSec
	}
	of, err := parseOnFail(rp.OnFail)
	if err != nil {
		return nil, err
	}
	if of != nil {
		p.OnFail = *of
	}
	for i := range *rp.Phases {
		ph, err := decodePhase(&(*rp.Phases)[i])
		if err != nil {
			return nil, err
		}
		p.Phases = append(p.Phases, *ph)
	}
	return p, nil
}

func decodePhase(n *yaml.Node) (*Phase, error) {
	var rp rawPhase
	if err := n.Decode(&rp); err != nil {
		return nil, schemaErr(err)
	}
	if rp.ID == nil {
		return nil, schemaErrf("phases: missing field `id`")
	}
	if rp.Prompt == nil {
		return nil, schemaErrf("phases: missing field `prompt` (phase %q)", *rp.ID)
	}
	if err := checkEnvStrings("phase \""+*rp.ID+"\"", n); err != nil {
		return nil, err
	}
	ph := &Phase{
		ID:          *rp.ID,
		Prompt:      *rp.Prompt,
		DependsOn:   rp.DependsOn,
		MaxAttempts: rp.MaxAttempts,
		TimeoutSec:  rp.TimeoutSec,
		Env:         rp.Env,
		BudgetUSD:   rp.BudgetUSD,
	}
	if rp.MaxAttempts != nil && *rp.MaxAttempts < 0 {
		return nil, schemaErrf("max_attempts: invalid value: integer `%d`, expected u32", *rp.MaxAttempts)
	}
	if err := nonNegative("timeout_sec", rp.TimeoutSec); err != nil {
		return nil, err
	}
	if rp.Cwd != nil {
		ph.Cwd = *rp.Cwd
	}
	if rp.Context != nil {
		ph.Context = *rp.Context
	}
	of, err := parseOnFail(rp.OnFail)
	if err != nil {
		return nil, err
	}
	ph.OnFail = of
	for i := range rp.Check {
		c, err := decodeCheck(&rp.Check[i])
		if err != nil {
			return nil, err
		}
		ph.Check = append(ph.Check, *c)
	}
	return ph, nil
}

func decodeCheck(n *yaml.Node) (*CheckSpec, error) {
	var rc rawCheck
	if err := n.Decode(&rc); err != nil {
		return nil, schemaErr(err)
	}
	if rc.Type == nil {
		return nil, schemaErrf("check: missing field `type`")
	}
	c := &CheckSpec{Type: *rc.Type}
	str := func(field string, v *string) (string, error) {
		if v == nil {
			return "", schemaErrf("check %s: missing field `%s`", c.Type, field)
		}
		return *v, nil
	}
	var err error
	switch c.Type {
	case "file_exists":
		c.Path, err = str("path", rc.Path)
	case "cmd_succeeds":
		c.Cmd, err = str("cmd", rc.Cmd)
		c.TimeoutSec = defaultCmdTimeoutSec
		if rc.TimeoutSec != nil {
			c.TimeoutSec = *rc.TimeoutSec
		}
	case "file_contains":
		if c.Path, err = str("path", rc.Path); err == nil {
			c.Pattern, err = str("pattern", rc.Pattern)
		}
	case "git_clean":
		c.AllowUntracked = rc.AllowUntracked != nil && *rc.AllowUntracked
	case "edda_event":
		c.EventType, err = str("event_type", rc.EventType)
		if rc.After != nil {
			c.After = *rc.After
		}
	case "wait_until":
		if rc.Check.Kind == 0 {
			return nil, schemaErrf("check wait_until: missing field `check`")
		}
		// The inner check is in tagged form only, as serde requires.
		c.Inner, err = decodeCheck(&rc.Check)
		c.IntervalSec, c.TimeoutSec, c.Backoff = defaultWaitIntervalSec, defaultWaitTimeoutSec, "linear"
		if rc.IntervalSec != nil {
			c.IntervalSec = *rc.IntervalSec
		}
		if rc.TimeoutSec != nil {
			c.TimeoutSec = *rc.TimeoutSec
		}
		if rc.Backoff != nil {
			switch *rc.Backoff {
			case "none", "linear", "exponential":
				c.Backoff = *rc.Backoff
			default:
				return nil, schemaErrf("unknown variant `%s`, expected one of `none`, `linear`, `exponential`", *rc.Backoff)
			}
		}
	default:
		return nil, schemaErrf("unknown variant `%s`, expected one of %s", c.Type, "`"+strings.Join(validCheckTypes, "`, `")+"`")
	}
	if err != nil {
		return nil, err
	}
	if err := nonNegative("timeout_sec", &c.TimeoutSec); err != nil {
		return nil, err
	}
	return c, nil
}

func isKebabCase(s string) bool {
	if s == "" {
		return false
	}
	first := s[0]
	if !(first >= 'a' && first <= 'z' || first >= '0' && first <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
			return false
		}
	}
	return true
}

func validatePlan(p *Plan) error {
	if !isKebabCase(p.Name) {
		return planErrorf("plan name must be kebab-case (lowercase letters, digits, hyphens), got: %q", p.Name)
	}
	if len(p.Phases) == 0 {
		return planErrorf("plan must have at least one phase")
	}
	seen := map[string]bool{}
	for _, ph := range p.Phases {
		if seen[ph.ID] {
			return planErrorf("duplicate phase id: %q", ph.ID)
		}
		seen[ph.ID] = true
	}
	for _, ph := range p.Phases {
		for _, dep := range ph.DependsOn {
			if !seen[dep] {
				return planErrorf("phase %q depends on %q which does not exist", ph.ID, dep)
			}
		}
	}
	for _, ph := range p.Phases {
		for _, c := range ph.Check {
			if c.Type == "wait_until" && c.Inner != nil && c.Inner.Type == "wait_until" {
				return planErrorf("wait_until cannot nest another wait_until")
			}
		}
	}
	return nil
}

// topoSort orders phases as edda does: Kahn's algorithm whose initial queue
// and each newly released batch are sorted by id. Ties are therefore broken
// alphabetically, not by file order.
func topoSort(p *Plan) ([]string, error) {
	inDegree := map[string]int{}
	dependents := map[string][]string{}
	for _, ph := range p.Phases {
		inDegree[ph.ID] += 0
	}
	for _, ph := range p.Phases {
		for _, dep := range ph.DependsOn {
			inDegree[ph.ID]++
			dependents[dep] = append(dependents[dep], ph.ID)
		}
	}
	var queue []string
	for id, d := range inDegree {
		if d == 0 {
			queue = append(queue, id)
		}
	}
	slices.Sort(queue)
	order := make([]string, 0, len(p.Phases))
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		order = append(order, id)
		var next []string
		for _, d := range dependents[id] {
			inDegree[d]--
			if inDegree[d] == 0 {
				next = append(next, d)
			}
		}
		slices.Sort(next)
		queue = append(queue, next...)
	}
	if len(order) != len(p.Phases) {
		var cycle []string
		for _, ph := range p.Phases {
			if !slices.Contains(order, ph.ID) {
				cycle = append(cycle, ph.ID)
			}
		}
		return nil, planErrorf("dependency cycle detected among phases: [%s]", strings.Join(cycle, ", "))
	}
	return order, nil
}
