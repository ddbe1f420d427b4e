package intent

import (
	"fmt"
	"strconv"
	"strings"
)

// Condition is when an intent has done its job and stops firing. It is
// evaluated after every fire whose target reached an outcome.
//
// Written as text:
//
//	task_completed             the target of the last fire completed (a task
//	                           completed; a run ended complete)
//	runs>=N                    the intent has run its target N times
//	all_of(c1, c2, ...)        every condition holds
//	any_of(c1, c2, ...)        at least one holds
type Condition struct {
	Kind CondKind    `json:"kind"`
	N    int         `json:"n,omitempty"`
	Of   []Condition `json:"of,omitempty"`
}

// CondKind names a predicate.
type CondKind string

// The predicates.
const (
	CondTaskCompleted CondKind = "task_completed"
	CondRuns          CondKind = "runs"
	CondAllOf         CondKind = "all_of"
	CondAnyOf         CondKind = "any_of"
)

// Limits keep a condition readable and its evaluation trivial.
const (
	maxCondDepth = 8
	maxCondNodes = 64
	maxCondRuns  = 1_000_000
	maxCondLen   = 1024
)

// Facts are what a condition is evaluated against.
type Facts struct {
	// Runs counts the fires whose target reached an outcome, this one
	// included.
	Runs int
	// Completed: this fire's target completed.
	Completed bool
}

// Holds evaluates the condition.
func (c Condition) Holds(f Facts) bool {
	switch c.Kind {
	case CondTaskCompleted:
		return f.Completed
	case CondRuns:
		return f.Runs >= c.N
	case CondAllOf:
		for _, sub := range c.Of {
			if !sub.Holds(f) {
				return false
			}
		}
		return len(c.Of) > 0
	case CondAnyOf:
		for _, sub := range c.Of {
			if sub.Holds(f) {
				return true
			}
		}
	}
	return false
}

// NeedsOutcome reports whether evaluating the condition needs to know how
// the target ended.
func (c Condition) NeedsOutcome() bool {
	if c.Kind == CondTaskCompleted {
		return true
	}
	for _, sub := range c.Of {
		if sub.NeedsOutcome() {
			return true
		}
	}
	return false
}

// String writes the condition as ParseCondition reads it.
func (c Condition) String() string {
	switch c.Kind {
	case CondRuns:
		return "runs>=" + strconv.Itoa(c.N)
	case CondAllOf, CondAnyOf:
		parts := make([]string, len(c.Of))
		for i, sub := range c.Of {
			parts[i] = sub.String()
		}
		return string(c.Kind) + "(" + strings.Join(parts, ", ") + ")"
	}
	return string(c.Kind)
}

// Validate checks a condition built without ParseCondition (one decoded
// from JSON, say).
func (c Condition) Validate() error {
	nodes := 0
	return c.validate(1, &nodes)
}

func (c Condition) validate(depth int, nodes *int) error {
	*nodes++
	if *nodes > maxCondNodes {
		return fmt.Errorf("more than %d predicates", maxCondNodes)
	}
	if depth > maxCondDepth {
		return fmt.Errorf("nested deeper than %d", maxCondDepth)
	}
	switch c.Kind {
	case CondTaskCompleted:
		if c.N != 0 || len(c.Of) > 0 {
			return fmt.Errorf("task_completed takes no arguments")
		}
	case CondRuns:
		if c.N < 1 || c.N > maxCondRuns {
			return fmt.Errorf("runs>=%d: N must be between 1 and %d", c.N, maxCondRuns)
		}
		if len(c.Of) > 0 {
			return fmt.Errorf("runs>=N takes no conditions")
		}
	case CondAllOf, CondAnyOf:
		if len(c.Of) == 0 {
			return fmt.Errorf("%s needs at least one condition", c.Kind)
		}
		for _, sub := range c.Of {
			if err := sub.validate(depth+1, nodes); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown predicate %q (want task_completed, runs>=N, all_of(...) or any_of(...))", c.Kind)
	}
	return nil
}

// ParseCondition reads a condition. The empty string and "none" are no
// condition (nil).
func ParseCondition(text string) (*Condition, error) {
	text = strings.TrimSpace(text)
	if text == "" || text == "none" {
		return nil, nil
	}
	if len(text) > maxCondLen {
		return nil, fmt.Errorf("longer than %d characters", maxCondLen)
	}
	p := condParser{in: text}
	c, err := p.cond(1)
	if err != nil {
		return nil, err
	}
	if p.skipSpace(); p.pos < len(p.in) {
		return nil, p.errorf("unexpected %q", p.in[p.pos:])
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

type condParser struct {
	in  string
	pos int
}

func (p *condParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at %d: %s", p.pos+1, fmt.Sprintf(format, args...))
}

func (p *condParser) skipSpace() {
	for p.pos < len(p.in) && (p.in[p.pos] == ' ' || p.in[p.pos] == '\t') {
		p.pos++
	}
}

func (p *condParser) ident() string {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.in) {
		b := p.in[p.pos]
		if b != '_' && (b < 'a' || b > 'z') && (b < 'A' || b > 'Z') {
			break
		}
		p.pos++
	}
	return strings.ToLower(p.in[start:p.pos])
}

func (p *condParser) accept(s string) bool {
	p.skipSpace()
	if strings.HasPrefix(p.in[p.pos:], s) {
		p.pos += len(s)
		return true
	}
	return false
}

func (p *condParser) cond(depth int) (Condition, error) {
	if depth > maxCondDepth {
		return Condition{}, p.errorf("nested deeper than %d", maxCondDepth)
	}
	at := p.pos
	switch name := p.ident(); CondKind(name) {
	case CondTaskCompleted:
		return Condition{Kind: CondTaskCompleted}, nil
	case CondRuns:
		if !p.accept(">=") {
			return Condition{}, p.errorf("runs wants >=N, e.g. runs>=3")
		}
		p.skipSpace()
		start := p.pos
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
		}
		n, err := strconv.Atoi(p.in[start:p.pos])
		if err != nil {
			return Condition{}, p.errorf("runs>= wants a whole number")
		}
		return Condition{Kind: CondRuns, N: n}, nil
	case CondAllOf, CondAnyOf:
		if !p.accept("(") {
			return Condition{}, p.errorf("%s wants (conditions, ...)", name)
		}
		c := Condition{Kind: CondKind(name)}
		for {
			sub, err := p.cond(depth + 1)
			if err != nil {
				return Condition{}, err
			}
			c.Of = append(c.Of, sub)
			if len(c.Of) > maxCondNodes {
				return Condition{}, p.errorf("more than %d predicates", maxCondNodes)
			}
			if p.accept(",") {
				continue
			}
			if p.accept(")") {
				return c, nil
			}
			return Condition{}, p.errorf("%s: want , or )", name)
		}
	case "":
		p.pos = at
		if p.skipSpace(); p.pos >= len(p.in) {
			return Condition{}, p.errorf("missing condition")
		}
		return Condition{}, p.errorf("unexpected %q", p.in[p.pos:p.pos+1])
	default:
		p.pos = at
		return Condition{}, p.errorf("unknown predicate %q (want task_completed, runs>=N, all_of(...) or any_of(...))", name)
	}
}
