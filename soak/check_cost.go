package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// spent is what a task spent over all its attempts: the cost query's
// total, else its attempts' state.json totals.
func spent(t TaskObs) float64 {
	if t.Workflow != nil && t.Workflow.CostUSD > 0 {
		return t.Workflow.CostUSD
	}
	var sum float64
	for _, p := range t.Plans {
		if p.State != nil {
			sum += p.State.TotalCostUSD
		}
	}
	return sum
}

// costliestPhase is the most a phase cost the task, by its job view (all
// tries of a phase over the view's attempts), else by its brief.
func costliestPhase(t TaskObs) (string, float64) {
	phase, most := "", 0.0
	if t.Job != nil {
		for _, s := range t.Job.Steps {
			if s.CostUSD > most {
				phase, most = s.Phase, s.CostUSD
			}
		}
	}
	if t.Brief != nil {
		for p, v := range t.Brief.ByPhase {
			if v > most || (v == most && p < phase) {
				phase, most = p, v
			}
		}
	}
	return phase, most
}

// CheckSpendWithinBlockingBudget: a task whose budget blocks stops at the
// first checkpoint past its limit, so what it spent passes the limit by at
// most the phase in flight. At the end: the overshoot is no more than its
// costliest phase. Along the way: once a sample showed its spend at the
// limit, no later sample of that attempt shows another phase running.
func CheckSpendWithinBlockingBudget(o *Observed, c Config) []Violation {
	c = c.withDefaults()
	var out []Violation
	for _, t := range o.Tasks {
		w := t.Workflow
		if w == nil || w.Budget == nil || w.Budget.Action != "block" {
			continue
		}
		sp, limit := spent(t), w.Budget.LimitUSD
		over := sp - limit
		if over <= c.CostTolerance {
			continue
		}
		phase, most := costliestPhase(t)
		if over <= most+c.CostTolerance {
			continue
		}
		if stoppedWithin(o, t, limit, c.Grace) {
			continue
		}
		out = append(out, violation(InvSpendWithinBlockingBudget, t.ID, time.Time{},
			"spent %s against a blocking budget of %s (attempt %d, plan %s): %s over, more than its costliest phase (%s, %s)",
			usd(sp), usd(limit), w.Attempt, w.PlanName, usd(over), phaseName(phase), usd(most)))
	}
	tls := timelines(o)
	tasks := make([]string, 0, len(tls))
	for k := range tls {
		tasks = append(tasks, k)
	}
	sort.Strings(tasks)
	for _, task := range tasks {
		var reached *point
		for i := range tls[task] {
			p := &tls[task][i]
			b := p.S.Budget
			if !p.S.HasCost || b == nil || b.Action != "block" || !p.S.Open {
				continue
			}
			if reached != nil && reached.S.Attempt != p.S.Attempt {
				reached = nil
			}
			if reached == nil {
				if p.S.CostUSD >= b.LimitUSD-1e-9 {
					reached = p
				}
				continue
			}
			if reached.S.CostUSD < b.LimitUSD-1e-9 {
				reached = nil // the budget was raised meanwhile
				if p.S.CostUSD >= b.LimitUSD-1e-9 {
					reached = p
				}
				continue
			}
			// A later phase seen running within the stop's real-time
			// window is the stop's lag (stoppedWithin); past it the
			// runtime let the budget pass.
			if p.S.Stage == "running" && p.S.Phase != "" && p.S.Phase != reached.S.Phase && p.At.Sub(reached.At) > c.Grace {
				out = append(out, violation(InvSpendWithinBlockingBudget, task, p.At,
					"at %s the task had spent %s of its blocking budget of %s in phase %s (attempt %d, plan %s), and at %s phase %s was running",
					ts(reached.At), usd(reached.S.CostUSD), usd(b.LimitUSD), phaseName(reached.S.Phase),
					reached.S.Attempt, reached.S.PlanName, ts(p.At), p.S.Phase))
				break
			}
		}
	}
	return out
}

// stoppedWithin reports whether the task's conductor of plan was seen gone
// within grace of the first sample that showed the task at or over its
// blocking budget. A stop takes real seconds (the decision, the worker's
// stop grace, a workflow task a killed worker held until it timed out),
// and at a compressed time scale phases of a second or two end within
// them: what they spent is the stop's lag, not a budget the runtime let
// pass. At real scale no phase is that short, and the rule above (no more
// than the phase in flight) is what the timeline shows.
//
// When the workflow learnt of the spend, stopped and closed between two
// samples, none shows it at the limit: the attempt's events.jsonl says
// when its spend reached the limit, and no phase may start there past
// the grace.
func stoppedWithin(o *Observed, t TaskObs, limit float64, grace time.Duration) bool {
	task, plan := t.ID, t.Workflow.PlanName
	var reached time.Time
	for _, s := range o.Samples {
		for _, ts := range s.Tasks {
			if ts.Task == task && ts.PlanName == plan && ts.HasCost && ts.CostUSD >= limit-1e-9 {
				reached = s.At
				break
			}
		}
		if !reached.IsZero() {
			break
		}
	}
	if crossed, late, ok := limitInEvents(t, plan, limit, grace); ok {
		if late {
			return false
		}
		if reached.IsZero() || crossed.Before(reached) {
			reached = crossed
		}
	}
	if reached.IsZero() {
		return false
	}
	for _, s := range o.Samples {
		if !s.At.After(reached.Add(grace)) {
			continue
		}
		for _, lc := range s.Conductors {
			if lc.Task == task && AttemptPlan(lc.Dir) == plan {
				return false
			}
		}
	}
	return true
}

// limitInEvents reads when the attempt's spend reached limit from its
// events.jsonl: what earlier attempts spent (the task's spend less this
// plan's events) plus this plan's phase costs in order. late says a phase
// started there more than grace after that. ok is false when the events
// never reach the limit or carry no time.
func limitInEvents(t TaskObs, plan string, limit float64, grace time.Duration) (crossed time.Time, late, ok bool) {
	var events []Event
	var own float64
	for _, p := range t.Plans {
		if p.Name == plan {
			events = p.Events
			for _, e := range events {
				if e.CostUSD != nil {
					own += *e.CostUSD
				}
			}
		}
	}
	sum := max(spent(t)-own, 0)
	for _, e := range events {
		at, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil {
			continue
		}
		if !ok {
			if e.CostUSD != nil {
				sum += *e.CostUSD
			}
			if sum >= limit-1e-9 {
				crossed, ok = at, true
			}
			continue
		}
		if e.Type == "phase_start" && at.Sub(crossed) > grace {
			return crossed, true, true
		}
	}
	return crossed, false, ok
}

func phaseName(p string) string {
	if p == "" {
		return "(none)"
	}
	return p
}

// CheckCostsAgree: for every task that ended, the job view's step costs
// add up to its attempts' state.json totals; the brief's total is its
// attempt's state.json total; and for a view of one attempt each step's
// cost is the brief's cost of that phase.
func CheckCostsAgree(o *Observed, c Config) []Violation {
	c = c.withDefaults()
	var out []Violation
	for _, t := range o.Tasks {
		if t.Workflow == nil || !t.Workflow.Closed {
			continue
		}
		lost := unreached(t)
		plans := map[string]*PlanObs{}
		for i := range t.Plans {
			plans[t.Plans[i].Name] = &t.Plans[i]
		}
		stateTotal := func(plan string) (float64, string) {
			p := plans[plan]
			if p == nil || p.State == nil {
				return 0, plan + " none"
			}
			return p.State.TotalCostUSD, plan + " " + usd(p.State.TotalCostUSD)
		}
		if j := t.Job; j != nil && len(j.Attempts) > 0 {
			var stepSum float64
			var steps []string
			for _, s := range j.Steps {
				stepSum += s.CostUSD
				steps = append(steps, fmt.Sprintf("%s %s/%d tries", s.Phase, usd(s.CostUSD), s.Tries))
			}
			var stateSum, lostSum float64
			var states []string
			for _, a := range j.Attempts {
				v, d := stateTotal(a)
				stateSum += v
				if lost[a] {
					lostSum += v
					d += " (host lost)"
				}
				states = append(states, d)
			}
			agree := near(stepSum, stateSum, c.CostTolerance)
			if lostSum > 0 {
				agree = stepSum >= stateSum-lostSum-c.CostTolerance && stepSum <= stateSum+c.CostTolerance
			}
			if !agree {
				out = append(out, violation(InvCostsAgree, t.ID, time.Time{},
					"job view steps add up to %s (%s) but state.json of its attempts adds up to %s (%s)",
					usd(stepSum), strings.Join(steps, ", "), usd(stateSum), strings.Join(states, ", ")))
			}
			if len(j.Attempts) == 1 && t.Brief != nil && t.Brief.PlanName == j.Attempts[0] && !lost[j.Attempts[0]] {
				for _, s := range j.Steps {
					if b := t.Brief.ByPhase[s.Phase]; !near(s.CostUSD, b, c.CostTolerance) {
						out = append(out, violation(InvCostsAgree, t.ID, time.Time{},
							"attempt plan %s phase %s: the job view's step costs %s over %d tries, the brief's cost.by_phase says %s",
							j.Attempts[0], s.Phase, usd(s.CostUSD), s.Tries, usd(b)))
					}
				}
			}
		}
		if b := t.Brief; b != nil && b.PlanName != "" {
			if p := plans[b.PlanName]; p != nil && p.State != nil {
				bt, st := deref(b.TotalUSD), p.State.TotalCostUSD
				agree := near(bt, st, c.CostTolerance)
				if lost[b.PlanName] {
					agree = bt <= st+c.CostTolerance
				}
				if !agree {
					out = append(out, violation(InvCostsAgree, t.ID, time.Time{},
						"the brief's cost.total_usd is %s but state.json of its attempt (plan %s) says %s",
						usd(bt), b.PlanName, usd(p.State.TotalCostUSD)))
				}
			}
		}
	}
	return out
}

// unreached names the attempts whose conductor ran on out of the
// workflow's reach: given up with its host, or left running when the
// stop found its host taking nothing. Such a conductor goes on until its
// host's fence stops it, so the workflow knows what the attempt did
// until then and state.json what it did in all: the attempt's state.json
// bounds what the brief and the view say from above only.
func unreached(t TaskObs) map[string]bool {
	out := map[string]bool{}
	if t.Workflow == nil {
		return out
	}
	for _, a := range t.Workflow.Attempts {
		if a.Ended == "host-lost" || a.ConductorLeft {
			out[a.PlanName] = true
		}
	}
	return out
}
