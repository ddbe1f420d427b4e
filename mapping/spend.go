package mapping

// What the conductor spent is not in its events alone: edda adds every
// agent call's cost to state.json's total_cost_usd before the phase's
// checks run, phase_failed carries no cost, and only plan_completed
// carries a total. An attempt that failed checks, timed out or was
// stopped therefore spent more than its events say. Spend is that truth,
// read from state.json (the total) and the agent transcripts (the split by
// phase); ApplySpend folds it into the brief at every checkpoint and at
// the end, so the brief, budgets and cost reports count failed attempts.

// Spend is what a conductor reports it spent so far.
type Spend struct {
	// TotalUSD is state.json's total_cost_usd; nil when unknown.
	TotalUSD *float64
	// ByPhase is each phase's cost over all its attempts (the agents'
	// transcripts); phases absent are not known.
	ByPhase map[string]float64
	// Culprit is the phase the part of the total no phase accounts for is
	// put on (the one failed, stale or running): without it the shares of
	// the phases would not add up to the total.
	Culprit string
}

// ApplySpend raises the brief's costs to what the conductor reports:
// spending never moves backwards, so an amount below the brief's is
// ignored. The change names the total and the phases whose cost moved.
func (s *BriefState) ApplySpend(sp Spend) (Change, bool) {
	s.ensure()
	c := Change{Pos: s.Applied}
	raise := func(id string, v float64) {
		v = roundCents(v)
		if _, known := s.Brief.Phases[id]; !known || v <= s.Brief.Cost.ByPhase[id] {
			return
		}
		s.Brief.Cost.ByPhase[id] = v
		ph := s.Brief.Phases[id]
		cost := v
		ph.CostUSD = &cost
		s.Brief.Phases[id] = ph
		for i := range c.Phases {
			if c.Phases[i].ID == id {
				return
			}
		}
		c.Phases = append(c.Phases, PhaseChange{ID: id, Fields: ChangedCost | ChangedPhaseCost})
	}
	for _, id := range s.PhaseOrder {
		if v, ok := sp.ByPhase[id]; ok {
			raise(id, v)
		}
	}
	if sp.TotalUSD != nil && *sp.TotalUSD >= 0 {
		total := roundCents(*sp.TotalUSD)
		var sum float64
		for _, id := range s.PhaseOrder {
			sum += s.Brief.Cost.ByPhase[id]
		}
		if rest := total - roundCents(sum); rest > 0 && sp.Culprit != "" {
			raise(sp.Culprit, s.Brief.Cost.ByPhase[sp.Culprit]+rest)
		}
		if s.Brief.Cost.TotalUSD == nil || total > *s.Brief.Cost.TotalUSD {
			s.Brief.Cost.TotalUSD = &total
			c.Fields |= ChangedTotalCost
		}
	}
	return c, c.Fields != 0 || len(c.Phases) > 0
}

// SpendCulprit is the phase of state.json the unattributed part of its
// total belongs to: the first failed or stale phase, else the first one
// running or checking; "" when none is.
func SpendCulprit(cs ConductorState) string {
	for _, ph := range cs.Phases {
		if ph.Status == PhaseFailed || ph.Status == PhaseStale {
			return ph.ID
		}
	}
	for _, ph := range cs.Phases {
		if ph.Status == "running" || ph.Status == "checking" {
			return ph.ID
		}
	}
	return ""
}
