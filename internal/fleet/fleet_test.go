package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/mapping"
)

func TestCheckHost(t *testing.T) {
	for _, ok := range []string{"h1", "worker-3.eu", "A_b", strings.Repeat("x", 63)} {
		require.NoError(t, CheckHost(ok), ok)
	}
	for _, bad := range []string{"", "-h", ".h", "h@2", "h 2", "h/2", "hé", strings.Repeat("x", 64)} {
		require.Error(t, CheckHost(bad), bad)
	}
	require.Equal(t, "karvi-edda@h2", Queue("karvi-edda", "h2"))
}

func TestJudge(t *testing.T) {
	plan := func(n int) string { return mapping.PlanName("T5", n) }
	chained := func(n int, nonce string) string { return mapping.AttemptPlanName("T5", n, nonce) }
	for _, tc := range []struct {
		name string
		run  string
		cur  Current
		want Verdict
	}{
		{"current attempt here", plan(2), Current{Attempt: 2, Host: "h1"}, Keep},
		{"current attempt elsewhere", plan(2), Current{Attempt: 2, Host: "h2"}, Stop},
		{"an attempt given up", plan(1), Current{Attempt: 2, Host: "h2"}, Stop},
		{"an attempt given up, the next one starting", plan(1), Current{Attempt: 2, Starting: true}, Stop},
		{"the attempt starting, host unknown", plan(2), Current{Attempt: 2, Starting: true}, Later},
		{"started before hosts were named", plan(1), Current{Attempt: 1}, Keep},
		{"started here, still starting", plan(1), Current{Attempt: 1, Host: "h1", Starting: true}, Keep},
		// Attempts named with their workflow chain's nonce: the plan the
		// workflow names is the one to keep; the same attempt number of
		// another chain (an earlier workflow of the task) is stale.
		{"this chain's current attempt here", chained(2, "0a1b2c3d"), Current{Attempt: 2, Plan: chained(2, "0a1b2c3d"), Host: "h1"}, Keep},
		{"another chain's attempt of the same number", chained(2, "ffee0011"), Current{Attempt: 2, Plan: chained(2, "0a1b2c3d"), Host: "h1"}, Stop},
		{"an attempt without a nonce, the workflow's has one", plan(2), Current{Attempt: 2, Plan: chained(2, "0a1b2c3d"), Host: "h1"}, Stop},
		{"this chain's attempt starting", chained(3, "0a1b2c3d"), Current{Attempt: 3, Plan: chained(3, "0a1b2c3d"), Starting: true}, Later},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Judge(Run{TaskID: "T5", Plan: tc.run}, tc.cur, "h1")
			require.Equal(t, tc.want, got, why)
			require.NotEmpty(t, why)
		})
	}
}

// The sweep stops what is stale, keeps what is current, leaves a task
// without a workflow alone, and asks again about what it could not decide
// until the answer comes.
func TestSweepStopsStaleRunsAndAsksAgain(t *testing.T) {
	runs := []Run{
		{TaskID: "A", Plan: mapping.PlanName("A", 1)}, // given up: A is at attempt 2
		{TaskID: "B", Plan: mapping.PlanName("B", 1)}, // B's current attempt here
		{TaskID: "C", Plan: mapping.PlanName("C", 1)}, // C has no workflow
		{TaskID: "D", Plan: mapping.PlanName("D", 1)}, // starting, then on h2
		{TaskID: "E", Plan: mapping.PlanName("E", 1)}, // the query fails once
	}
	asked := map[string]int{}
	var stopped []string
	s := &Sweeper{
		Host: "h1",
		Live: func() ([]Run, error) { return runs, nil },
		Ask: func(_ context.Context, task string) (Current, bool, error) {
			asked[task]++
			switch task {
			case "A":
				return Current{Attempt: 2, Host: "h3"}, true, nil
			case "B":
				return Current{Attempt: 1, Host: "h1"}, true, nil
			case "C":
				return Current{}, false, nil
			case "D":
				if asked[task] == 1 {
					return Current{Attempt: 1, Starting: true}, true, nil
				}
				return Current{Attempt: 1, Host: "h2"}, true, nil
			}
			if asked[task] == 1 {
				return Current{}, false, errors.New("no poller")
			}
			return Current{Attempt: 1, Host: "h1"}, true, nil
		},
		Stop: func(_ context.Context, r Run) error {
			stopped = append(stopped, r.TaskID)
			return nil
		},
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Retry: time.Millisecond,
	}
	n, err := s.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []string{"A", "D"}, stopped)
	require.Equal(t, map[string]int{"A": 1, "B": 1, "C": 1, "D": 2, "E": 2}, asked)
}

func TestSweepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sweeper{
		Host: "h1",
		Live: func() ([]Run, error) { return []Run{{TaskID: "A", Plan: mapping.PlanName("A", 1)}}, nil },
		Ask: func(context.Context, string) (Current, bool, error) {
			cancel()
			return Current{Attempt: 1, Starting: true}, true, nil
		},
		Stop:  func(context.Context, Run) error { return nil },
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Retry: time.Hour,
	}
	_, err := s.Sweep(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

// The sweep asks again about undecided runs after pauses the worker's
// time scale divides; a Retry set is used as given.
func TestSweepPausesFollowTheTimeScale(t *testing.T) {
	for _, tc := range []struct {
		s              Sweeper
		first, longest time.Duration
	}{
		{Sweeper{}, 5 * time.Second, time.Minute},
		{Sweeper{Scale: 60}, 5 * time.Second / 60, time.Second},
		{Sweeper{Scale: 60, Retry: time.Second}, time.Second, time.Second},
	} {
		first, longest := tc.s.pauses()
		require.Equal(t, tc.first, first, "scale %v retry %s", tc.s.Scale, tc.s.Retry)
		require.Equal(t, tc.longest, longest, "scale %v retry %s", tc.s.Scale, tc.s.Retry)
	}
}
