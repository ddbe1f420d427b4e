//go:build realserver

package e2e

import (
	"fmt"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// The worker's /metrics after two tasks ran on the simulator: the SDK's
// metrics and the worker's own, agreeing with what the tasks did.
func TestWorkerServesMetrics(t *testing.T) {
	port, err := devenv.FreePort()
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	r := testrig.New(t, testrig.Options{WorkerArgs: []string{"-metrics-addr", addr}})
	ids := []string{"M1", "M2"}
	var runs []client.WorkflowRun
	for _, id := range ids {
		r.Workspace(id)
		// Both wait for a slot of a pool of their own, so its gauges show.
		runs = append(runs, r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, id, "Metrics task "+id+"."),
			Slots: &taskapi.SlotRequest{Pool: "metrics-" + r.Queue}}))
	}
	events, patches := 0, 0
	for i, run := range runs {
		res := r.Result(run)
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, ids[i])
		events += len(r.Events(ids[i], res.PlanName))
		patches += len(r.FilePatches(ids[i]))
	}

	m := scrape(t, "http://"+addr+"/metrics")
	// The SDK's own, under Prometheus names, labelled by type.
	require.GreaterOrEqual(t, m.value("temporal_workflow_completed_total", "workflow_type", "TaskWorkflow"), 2.0)
	require.Positive(t, m.count("temporal_activity_execution_latency_seconds", "activity_type", "SetTaskStatus"))
	require.Positive(t, m.count("temporal_activity_schedule_to_start_latency_seconds", "activity_type", "StartAttempt"))
	require.Positive(t, m.count("temporal_workflow_task_execution_latency_seconds", "workflow_type", "TaskWorkflow"))
	require.Zero(t, m.value("temporal_workflow_task_execution_failed_total"))

	// The worker's own.
	require.GreaterOrEqual(t, m.value("karvi_edda_conductor_events_read_total"), float64(events),
		"every event line of both logs was read")
	require.Positive(t, m.value("karvi_edda_conductor_events_read_total", "type", "phase_start"))
	require.Equal(t, float64(patches), m.count("karvi_edda_brief_patch_duration_seconds"),
		"one measured round trip per patch the sink holds")
	require.True(t, m.has("karvi_edda_conductors_running"), "the gauge is exported")
	require.Zero(t, m.value("karvi_edda_conductors_running"), "no conductor is followed once the tasks ended")
	require.Zero(t, m.value("karvi_edda_sink_errors_total"))
	require.Zero(t, m.value("karvi_edda_malformed_event_lines_total"))
	require.Equal(t, 2.0, m.value("karvi_edda_attempts_started_total", "workflow_type", "TaskWorkflow"))
	require.Equal(t, 2.0, m.value("karvi_edda_attempts_ended_total", "outcome", "completed"))
	require.Equal(t, 2.0, m.value("karvi_edda_attempts_ended_total"), "no attempt ended otherwise")
	pool := "metrics-" + r.Queue
	require.Positive(t, m.value("karvi_edda_slots_max_concurrent", "pool", pool), "the pool's limit")
	require.True(t, m.has("karvi_edda_slots_held"))
	require.Zero(t, m.value("karvi_edda_slots_waiting", "pool", pool), "nobody waits once the tasks ended")
}

// scraped is one scrape, by metric family.
type scraped map[string]*dto.MetricFamily

func scrape(t *testing.T, url string) scraped {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

func (s scraped) has(name string) bool { return s[name] != nil }

// matching are the family's series whose labels include labels (name,
// value, name, value...). A histogram's family is its name without the
// _bucket, _sum and _count suffixes.
func (s scraped) matching(name string, labels ...string) []*dto.Metric {
	f := s[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			ok = ok && have[labels[i]] == labels[i+1]
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// value sums the matching series of a counter or gauge; 0 when none.
func (s scraped) value(name string, labels ...string) float64 {
	v := 0.0
	for _, m := range s.matching(name, labels...) {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return v
}

// count sums the observations of the matching series of a histogram.
func (s scraped) count(name string, labels ...string) float64 {
	v := 0.0
	for _, m := range s.matching(name, labels...) {
		v += float64(m.GetHistogram().GetSampleCount())
	}
	return v
}
