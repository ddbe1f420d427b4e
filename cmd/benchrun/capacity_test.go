package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/bench"
)

func TestSplitBurstSeparatesTheStartFromTheRest(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64, ms int) bench.Sample {
		return bench.Sample{At: start.Add(time.Duration(s * float64(time.Second))), Latency: time.Duration(ms) * time.Millisecond}
	}
	burst, rest, slowestAt := splitBurst([]bench.Sample{at(0.5, 900), at(3, 20), at(9.9, 10), at(10, 5), at(15, 40)}, start)
	require.Equal(t, 3, burst.N)
	require.Equal(t, 900.0, burst.Max)
	require.Equal(t, 2, rest.N)
	require.Equal(t, 40.0, rest.Max)
	require.InDelta(t, 0.5, slowestAt, 1e-9)

	burst, rest, slowestAt = splitBurst(nil, start)
	require.Zero(t, burst.N)
	require.Zero(t, rest.N)
	require.Zero(t, slowestAt)
}
