package jobview

import (
	"fmt"
	"math"
	"time"
)

// Verdict is what the attempt's checks said so far: one test result per
// check of every finished phase try, in plan order, then try order.
//
// A try's checks come from state.json when a snapshot caught them (names
// from the plan, durations and details from the conductor). Otherwise the
// events tell: a phase passes only when all its checks pass, so a passed
// try passes each of the plan's checks, with no duration; a try failed by
// a check fails the check its error names (the phase's only cmd_succeeds
// check, else "checks"), with the error as output. A try that failed for
// another reason (an agent crash, a timeout, the budget) ran no check and
// shows only in the logs. Without the plan, a phase stands for its checks.
func (t *Tally) Verdict(passed bool) Verdict {
	v := Verdict{Passed: passed, TestResults: []TestResult{},
		Logs: cloneSlice(t.Logs), Artifacts: cloneSlice(t.Artifacts)}
	if v.Logs == nil {
		v.Logs = []string{}
	}
	if v.Artifacts == nil {
		v.Artifacts = []string{}
	}
	for i := range t.Phases {
		v.TestResults = append(v.TestResults, t.Phases[i].results(t.PlanKnown)...)
	}
	if n := len(v.TestResults); n > maxResults {
		v.TestResults = v.TestResults[n-maxResults:]
		v.Logs = append(v.Logs, fmt.Sprintf("%d earlier test results not shown", n-maxResults))
	}
	return v
}

func (p *PhaseTally) results(planKnown bool) []TestResult {
	var out []TestResult
	names := p.Checks
	if !planKnown {
		names = []string{""} // the phase stands for its checks
	}
	if p.Skipped {
		for _, n := range names {
			out = append(out, TestResult{Name: p.label(n, 0), Status: TestSkipped, Output: text(p.SkipReason)})
		}
	}
	multi := p.TryCount > 1
	for _, tr := range p.Tries {
		try := 0
		if multi {
			try = tr.N
		}
		switch {
		case tr.Status == TryRunning:
		case len(tr.Checks) > 0:
			for j, c := range tr.Checks {
				name := c.CheckType
				if j < len(p.Checks) {
					name = p.Checks[j]
				}
				var out0 *string
				if c.Detail != nil {
					out0 = text(*c.Detail)
				}
				out = append(out, TestResult{Name: p.label(name, try), Status: checkStatus(c.Status),
					DurationMS: c.DurationMS, Output: out0})
			}
		case tr.Status == TryPassed:
			for _, n := range names {
				out = append(out, TestResult{Name: p.label(n, try), Status: TestPassed})
			}
		case tr.CheckFailed:
			out = append(out, TestResult{Name: p.label(p.failedCheck(planKnown), try), Status: TestFailed,
				Output: text(tr.Error)})
		}
	}
	return out
}

// failedCheck names the check a failure without a check index refers to.
func (p *PhaseTally) failedCheck(planKnown bool) string {
	switch {
	case p.OnlyCmd > 0 && p.OnlyCmd <= len(p.Checks):
		return p.Checks[p.OnlyCmd-1]
	case len(p.Checks) == 1:
		return p.Checks[0]
	case planKnown:
		return "checks"
	}
	return ""
}

// label is "phase: check (try n)", leaving out what is empty or zero.
func (p *PhaseTally) label(check string, try int) string {
	s := p.ID
	if check != "" {
		s += ": " + check
	}
	if try > 0 {
		s += fmt.Sprintf(" (try %d)", try)
	}
	return s
}

// checkStatus maps edda's check status: waiting never ran (an earlier
// check of the try failed), running was cut short.
func checkStatus(s string) string {
	switch s {
	case "passed":
		return TestPassed
	case "failed":
		return TestFailed
	case "waiting", "skipped":
		return TestSkipped
	}
	return TestError
}

func text(s string) *string {
	if s == "" {
		return nil
	}
	s = clip(s, MaxOutputBytes)
	return &s
}

// Metrics is the attempt's own metrics, as its metrics.json holds them:
// the conductor's time from its first event to its last, the tokens and
// costs its events reported (a line that names no model counted as the
// tally's model, else as model, else as UnknownModel), each phase's time, cost and tries, and
// the tries beyond each phase's first.
func (t *Tally) Metrics(jobID, model string) Metrics {
	m := Metrics{JobID: jobID, Attempt: t.Attempt, TotalTime: DurationOf(t.span()),
		Cost: CostEstimate{ByModel: map[string]float64{}}, StepMetrics: []StepMetrics{}}
	name := func(s string) string { return modelOf(s, t.Model, model) }
	m.setCosts(t.modelCosts(model))
	for _, u := range t.Usage {
		m.TokenUsage = mergeUsage(m.TokenUsage, TokenUsage{Model: name(u.Model),
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens})
	}
	for _, p := range t.Phases {
		s := StepMetrics{StepID: p.ID, Duration: msDuration(p.DurationMS), CostUSD: roundMicros(p.cost() + p.RestUSD), Tries: p.TryCount}
		if p.Tokens != nil {
			s.Tokens = &TokenUsage{Model: name(p.Tokens.Model), InputTokens: p.Tokens.InputTokens, OutputTokens: p.Tokens.OutputTokens}
		}
		m.StepMetrics = append(m.StepMetrics, s)
		m.RetryCount += max(p.TryCount-1, 0)
	}
	return m
}

// modelCosts is what each model cost, models named (see Metrics): the
// phase events' costs, and what the plan's total has beyond them, which
// only the total reports (a failed try's cost), counted as the default
// model's.
func (t *Tally) modelCosts(model string) []ModelCost {
	var costs []ModelCost
	var sum float64
	for _, c := range t.Costs {
		costs = mergeCost(costs, ModelCost{Model: modelOf(c.Model, t.Model, model), USD: c.USD})
		sum += c.USD
	}
	if t.PlanCostUSD != nil {
		if extra := roundMicros(*t.PlanCostUSD - sum); extra > 0 {
			costs = mergeCost(costs, ModelCost{Model: modelOf(t.Model, model), USD: extra})
		}
	}
	return costs
}

func mergeCost(list []ModelCost, c ModelCost) []ModelCost {
	for i := range list {
		if list[i].Model == c.Model {
			list[i].USD += c.USD
			return list
		}
	}
	return append(list, c)
}

// setCosts fills the cost estimate from per-model sums, rounded: the
// total is the sum of the rounded parts, so the two always agree.
func (m *Metrics) setCosts(costs []ModelCost) {
	m.Cost = CostEstimate{ByModel: make(map[string]float64, len(costs))}
	var total float64
	for _, c := range costs {
		usd := roundMicros(c.USD)
		m.Cost.ByModel[c.Model] = usd
		total += usd
	}
	m.Cost.TotalUSD = roundMicros(total)
}

func mergeUsage(list []TokenUsage, u TokenUsage) []TokenUsage {
	for i := range list {
		if list[i].Model == u.Model {
			list[i].InputTokens += u.InputTokens
			list[i].OutputTokens += u.OutputTokens
			return list
		}
	}
	return append(list, u)
}

func msDuration(ms int64) Duration {
	return DurationOf(time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond)
}

// roundMicros drops float noise from sums (0.85+0.42+0.18 is not 1.45 in
// binary) without hiding sub-cent amounts.
func roundMicros(f float64) float64 {
	return math.Round(f*1e6) / 1e6
}
