package intakeflow

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/internal/metrics"
)

type (
	counterFunc func(int64)
	gaugeFunc   func(float64)
	timerFunc   func(time.Duration)
)

func (f counterFunc) Inc(d int64)          { f(d) }
func (f gaugeFunc) Update(v float64)       { f(v) }
func (f timerFunc) Record(d time.Duration) { f(d) }

// recorded keeps the last value of each gauge and the sum of each counter,
// by name and tags ("name{k=v,...}").
type recorded struct {
	mu     sync.Mutex
	values map[string]float64
}

type recHandler struct {
	r    *recorded
	tags map[string]string
}

func (h recHandler) key(name string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(h.tags)) {
		kv = append(kv, k+"="+h.tags[k])
	}
	return name + "{" + strings.Join(kv, ",") + "}"
}

func (h recHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return recHandler{r: h.r, tags: merged}
}

func (h recHandler) Counter(name string) client.MetricsCounter {
	return counterFunc(func(d int64) {
		h.r.mu.Lock()
		defer h.r.mu.Unlock()
		h.r.values[h.key(name)] += float64(d)
	})
}

func (h recHandler) Gauge(name string) client.MetricsGauge {
	return gaugeFunc(func(v float64) {
		h.r.mu.Lock()
		defer h.r.mu.Unlock()
		h.r.values[h.key(name)] = v
	})
}

func (h recHandler) Timer(string) client.MetricsTimer {
	return timerFunc(func(time.Duration) {})
}

func (r *recorded) get(key string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.values[key]
}

// karvi refusing the token, then down, then back: the gauges say which
// while it lasts and fall to 0 after, each problem is counted once as it
// begins, and the Web UI's details say what is wrong in words.
func TestIntakeKarviProblemsAreMeasured(t *testing.T) {
	const url = "http://127.0.0.1:3461"
	down := "karvi " + url + ": GET /api/board: dial tcp 127.0.0.1:3461: connect: connection refused"
	s := &script{follows: []intakeapi.FollowResult{
		{Problem: "karvi " + url + ": GET /api/board: HTTP 401 (unauthorized): unauthorized", Unauthorized: true},
		{Problem: down},
		{Problem: down},
		{Board: board(5, task("T1", "dispatched"))},
	}}
	rec := &recorded{values: map[string]float64{}}
	var ts testsuite.WorkflowTestSuite
	ts.SetMetricsHandler(recHandler{r: rec})
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(IntakeWorkflow, workflow.RegisterOptions{Name: intakeapi.WorkflowName})
	env.RegisterActivityWithOptions(s.follow, activity.RegisterOptions{Name: intakeapi.FollowActivity})
	env.RegisterActivityWithOptions(s.apply, activity.RegisterOptions{Name: intakeapi.ApplyActivity})
	board := "{board=" + url + "}"
	var refusedNow float64
	env.RegisterDelayedCallback(func() { refusedNow = rec.get(metrics.IntakeKarviUnauthorized + board) }, time.Minute)
	env.ExecuteWorkflow(intakeapi.WorkflowName, intakeapi.Input{BoardURL: url, TicksBeforeContinue: 4})

	require.EqualValues(t, 1, refusedNow, "unauthorized while karvi refuses the token")
	require.EqualValues(t, 0, rec.get(metrics.IntakeKarviUnauthorized+board))
	require.EqualValues(t, 0, rec.get(metrics.IntakeKarviUnreachable+board), "karvi answers again")
	require.EqualValues(t, 1, rec.get(metrics.IntakeKarviProblems+"{board="+url+",kind=unauthorized}"))
	require.EqualValues(t, 1, rec.get(metrics.IntakeKarviProblems+"{board="+url+",kind=unreachable}"), "counted as it begins, not per read")
	require.Equal(t, []string{"start T1"}, s.kinds())

	in := intakeapi.Input{BoardURL: url, RuntimeHint: "edda"}
	require.Contains(t, details(in, "HTTP 401", true), "karvi refuses the intake's token (401/403)")
	require.Contains(t, details(in, down, false), "karvi cannot be read")
	require.Contains(t, details(in, down, false), down)
	require.NotContains(t, details(in, "", false), "karvi")
}
