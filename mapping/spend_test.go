package mapping

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fptr(f float64) *float64 { return &f }

// A phase whose checks failed three times spent three agent calls: edda
// adds each to state.json's total before the checks run, and phase_failed
// carries no cost. The brief must show what was spent, split by phase so
// the shares add up to the total.
func TestSpendFromStateCountsFailedAttempts(t *testing.T) {
	s := NewBriefState("T1", PlanSummary{Name: "p", PhaseIDs: []string{"build", "test"}})
	s.Reduce(Event{Type: EventPhasePassed, PhaseID: "build", Attempt: 1, CostUSD: fptr(0.10)})
	for n := 1; n <= 3; n++ {
		s.Reduce(Event{Type: EventPhaseFailed, PhaseID: "test", Attempt: n, Error: "exit 1"})
	}
	assert.Nil(t, s.Brief.Cost.TotalUSD, "no event carries a total")

	c, changed := s.ApplySpend(Spend{TotalUSD: fptr(0.40), ByPhase: map[string]float64{"build": 0.10, "test": 0.30}})
	require.True(t, changed)
	require.NotNil(t, s.Brief.Cost.TotalUSD)
	assert.InDelta(t, 0.40, *s.Brief.Cost.TotalUSD, 1e-9)
	assert.InDelta(t, 0.30, s.Brief.Cost.ByPhase["test"], 1e-9)
	assert.NotZero(t, c.Fields&ChangedTotalCost)
	require.Len(t, c.Phases, 1)
	assert.Equal(t, "test", c.Phases[0].ID)

	_, changed = s.ApplySpend(Spend{TotalUSD: fptr(0.40), ByPhase: map[string]float64{"build": 0.10, "test": 0.30}})
	assert.False(t, changed, "the same spend again changes nothing")
}

// Without a per-phase split (no transcripts) the part of the total no
// phase accounts for goes to the phase that stopped the plan, so the
// phases still add up to the total.
func TestSpendRemainderGoesToTheCulprit(t *testing.T) {
	s := NewBriefState("T1", PlanSummary{Name: "p", PhaseIDs: []string{"build", "test"}})
	s.Reduce(Event{Type: EventPhasePassed, PhaseID: "build", Attempt: 1, CostUSD: fptr(0.10)})
	_, changed := s.ApplySpend(Spend{TotalUSD: fptr(0.60), Culprit: "test"})
	require.True(t, changed)
	assert.InDelta(t, 0.60, *s.Brief.Cost.TotalUSD, 1e-9)
	assert.InDelta(t, 0.50, s.Brief.Cost.ByPhase["test"], 1e-9)
	assert.InDelta(t, 0.10, s.Brief.Cost.ByPhase["build"], 1e-9)
}

// Spending never moves backwards: a passing attempt's own cost does not
// replace what its phase's failed attempts already added.
func TestSpendNeverShrinks(t *testing.T) {
	s := NewBriefState("T1", PlanSummary{Name: "p", PhaseIDs: []string{"test"}})
	s.ApplySpend(Spend{TotalUSD: fptr(0.20), ByPhase: map[string]float64{"test": 0.20}})
	s.Reduce(Event{Type: EventPhasePassed, PhaseID: "test", Attempt: 3, CostUSD: fptr(0.10)})
	assert.InDelta(t, 0.20, s.Brief.Cost.ByPhase["test"], 1e-9)
	_, changed := s.ApplySpend(Spend{TotalUSD: fptr(0.15)})
	assert.False(t, changed)
	assert.InDelta(t, 0.20, *s.Brief.Cost.TotalUSD, 1e-9)
}
