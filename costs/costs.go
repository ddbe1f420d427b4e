package costs

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Action is what a budget does once it is spent.
type Action string

// Budget actions.
const (
	// Warn: a note, and the work goes on.
	Warn Action = "warn"
	// Block: no new work starts and the work under way is aborted.
	Block Action = "block"
	// Pause: the work under way is stopped gracefully and waits, its
	// progress kept, until a person raises the budget or resumes it.
	Pause Action = "pause"
)

// WarnAt is the share of a budget at which a warning is given.
const WarnAt = 0.8

// MaxLimitUSD bounds a budget, so a typo (50000 for 50.00) is caught.
const MaxLimitUSD = 100_000

// Budget is a spending limit in US dollars.
type Budget struct {
	LimitUSD float64 `json:"limitUsd"`
	Action   Action  `json:"action"`
}

// Validate says what is wrong with a budget, naming the field.
func (b Budget) Validate() error {
	switch {
	case math.IsNaN(b.LimitUSD) || math.IsInf(b.LimitUSD, 0) || b.LimitUSD <= 0:
		return fmt.Errorf("budget: limitUsd: %v must be a positive amount", b.LimitUSD)
	case b.LimitUSD > MaxLimitUSD:
		return fmt.Errorf("budget: limitUsd: %v is more than %d", b.LimitUSD, MaxLimitUSD)
	case b.Action != Warn && b.Action != Block && b.Action != Pause:
		return fmt.Errorf("budget: action: %q must be %q, %q or %q", b.Action, Warn, Block, Pause)
	}
	return nil
}

// Level is where spending stands against a budget.
type Level int

// Levels, in order.
const (
	Under Level = iota
	Warning
	Spent
)

func (l Level) String() string {
	switch l {
	case Warning:
		return "warning"
	case Spent:
		return "spent"
	}
	return "under"
}

// Level is the level spent reaches: Warning from 80 %, Spent from 100 %.
func (b Budget) Level(spent float64) Level {
	switch {
	case b.LimitUSD <= 0:
		return Under
	case spent >= b.LimitUSD:
		return Spent
	case spent >= WarnAt*b.LimitUSD:
		return Warning
	}
	return Under
}

// ExceededMessage is what a task aborted for its budget says, and what its
// brief and karvi's lastError read.
func (b Budget) ExceededMessage(spent float64) string {
	return fmt.Sprintf("Budget exceeded ($%.2f spent of $%.2f)", spent, b.LimitUSD)
}

// WarningMessage is the note given at 80 %.
func (b Budget) WarningMessage(spent float64) string {
	return fmt.Sprintf("Budget warning: $%.2f spent of $%.2f (%.0f%%)", spent, b.LimitUSD, 100*spent/b.LimitUSD)
}

// ErrNegative: a cost below zero, which no agent reports.
var ErrNegative = errors.New("negative cost")

// Summary is spending, in US dollars, in total and by phase, task, model and
// skill. Tokens are not in it: the conductor reports none.
type Summary struct {
	TotalUSD float64            `json:"totalUsd"`
	ByPhase  map[string]float64 `json:"byPhase,omitempty"`
	ByTask   map[string]float64 `json:"byTask,omitempty"`
	ByModel  map[string]float64 `json:"byModel,omitempty"`
	BySkill  map[string]float64 `json:"bySkill,omitempty"`
}

// Spend is one attempt's spending: its task, the model and skill it ran
// with, and its cost per phase.
type Spend struct {
	Task    string
	Model   string
	Skill   string
	ByPhase map[string]float64
	// TotalUSD is the attempt's total when the phases do not add up to it
	// (a cost reported for the plan as a whole); zero means their sum.
	TotalUSD float64
}

// Add adds an attempt's spending. An empty model or skill counts as
// "unknown" and "default".
func (s *Summary) Add(sp Spend) error {
	sum := 0.0
	//workflowcheck:ignore the keys are sorted
	phases := slices.Sorted(maps.Keys(sp.ByPhase))
	for _, id := range phases {
		c := sp.ByPhase[id]
		if c < 0 || math.IsNaN(c) {
			return fmt.Errorf("phase %s: %v: %w", id, c, ErrNegative)
		}
		sum += c
	}
	total := max(sp.TotalUSD, sum)
	if total < 0 || math.IsNaN(total) {
		return fmt.Errorf("task %s: %v: %w", sp.Task, total, ErrNegative)
	}
	for _, id := range phases {
		add(&s.ByPhase, id, sp.ByPhase[id])
	}
	model, skill := sp.Model, sp.Skill
	if model == "" {
		model = "unknown"
	}
	if skill == "" {
		skill = "default"
	}
	if sp.Task != "" {
		add(&s.ByTask, sp.Task, total)
	}
	add(&s.ByModel, model, total)
	add(&s.BySkill, skill, total)
	s.TotalUSD += total
	return nil
}

func add(m *map[string]float64, k string, v float64) {
	if *m == nil {
		*m = map[string]float64{}
	}
	(*m)[k] += v
}
