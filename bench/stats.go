package bench

import (
	"math"
	"sort"
	"time"
)

// Summary describes a sample of durations.
type Summary struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50Ms"`
	P95  float64 `json:"p95Ms"`
	P99  float64 `json:"p99Ms"`
	Max  float64 `json:"maxMs"`
	Mean float64 `json:"meanMs"`
}

// Summarize returns percentiles in milliseconds (nearest rank, so every
// figure is an observed value). An empty sample gives a zero Summary.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	ms := make([]float64, len(ds))
	var sum float64
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	sort.Float64s(ms)
	return Summary{
		N:    len(ms),
		P50:  Percentile(ms, 50),
		P95:  Percentile(ms, 95),
		P99:  Percentile(ms, 99),
		Max:  ms[len(ms)-1],
		Mean: sum / float64(len(ms)),
	}
}

// Percentile is the nearest-rank p-th percentile of sorted values.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// Median of values (the mean of the middle two for an even count).
func Median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// MedianSummary takes the median of each field over several runs' summaries,
// which is what the report quotes: one noisy run cannot move it.
func MedianSummary(runs []Summary) Summary {
	if len(runs) == 0 {
		return Summary{}
	}
	pick := func(f func(Summary) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return Median(v)
	}
	return Summary{
		N:    int(pick(func(s Summary) float64 { return float64(s.N) })),
		P50:  pick(func(s Summary) float64 { return s.P50 }),
		P95:  pick(func(s Summary) float64 { return s.P95 }),
		P99:  pick(func(s Summary) float64 { return s.P99 }),
		Max:  pick(func(s Summary) float64 { return s.Max }),
		Mean: pick(func(s Summary) float64 { return s.Mean }),
	}
}
