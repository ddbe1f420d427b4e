package costs

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBudgetLevels(t *testing.T) {
	b := Budget{LimitUSD: 0.5, Action: Block}
	for _, c := range []struct {
		spent float64
		want  Level
	}{{0, Under}, {0.39, Under}, {0.4, Warning}, {0.49, Warning}, {0.5, Spent}, {3, Spent}} {
		require.Equal(t, c.want, b.Level(c.spent), "spent %v", c.spent)
	}
	require.Equal(t, "Budget exceeded ($0.62 spent of $0.50)", b.ExceededMessage(0.62))
	require.Equal(t, "Budget warning: $0.41 spent of $0.50 (82%)", b.WarningMessage(0.41))
	require.Equal(t, Under, Budget{}.Level(10), "no budget, no level")
}

func TestBudgetValidate(t *testing.T) {
	for _, c := range []struct {
		b    Budget
		want string
	}{
		{Budget{LimitUSD: 1, Action: Warn}, ""},
		{Budget{LimitUSD: 0, Action: Warn}, "limitUsd: 0 must be a positive amount"},
		{Budget{LimitUSD: -1, Action: Block}, "limitUsd: -1 must be a positive amount"},
		{Budget{LimitUSD: math.NaN(), Action: Block}, "must be a positive amount"},
		{Budget{LimitUSD: 1e9, Action: Block}, "limitUsd: 1e+09 is more than 100000"},
		{Budget{LimitUSD: 1, Action: Pause}, ""},
		{Budget{LimitUSD: 1, Action: "stop"}, `action: "stop" must be "warn", "block" or "pause"`},
	} {
		err := c.b.Validate()
		if c.want == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, c.want)
	}
}

func TestSummaryAdds(t *testing.T) {
	var s Summary
	require.NoError(t, s.Add(Spend{Task: "a", Model: "sonnet", ByPhase: map[string]float64{"implement": 0.85, "test": 0.42}}))
	require.NoError(t, s.Add(Spend{Task: "a", Model: "opus", Skill: "review", ByPhase: map[string]float64{"implement": 1}}))
	require.NoError(t, s.Add(Spend{Task: "b", TotalUSD: 0.3}))
	require.InDelta(t, 2.57, s.TotalUSD, 1e-9)
	require.InDelta(t, 1.85, s.ByPhase["implement"], 1e-9)
	require.InDelta(t, 2.27, s.ByTask["a"], 1e-9)
	require.InDelta(t, 1.27, s.ByModel["sonnet"], 1e-9)
	require.InDelta(t, 0.3, s.ByModel["unknown"], 1e-9)
	require.InDelta(t, 1.57, s.BySkill["default"], 1e-9)
	before := s
	err := s.Add(Spend{Task: "c", ByPhase: map[string]float64{"x": -1}})
	require.True(t, errors.Is(err, ErrNegative))
	require.Equal(t, before.TotalUSD, s.TotalUSD, "a bad spend adds nothing")
}
