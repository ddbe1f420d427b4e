package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/metrics"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/mapping"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type okSink struct{}

func (okSink) PatchBrief(context.Context, string, json.RawMessage) error    { return nil }
func (okSink) SetStatus(context.Context, string, sink.StatusUpdate) error   { return nil }
func (okSink) CurrentBrief(context.Context, string) (map[string]any, error) { return nil, nil }

// The scrape shows the SDK's metrics and the worker's under Prometheus
// names, with duration buckets in seconds, and the Go runtime's.
func TestExporterSpeaksPrometheus(t *testing.T) {
	e, err := newExporter(discard())
	require.NoError(t, err)
	sdk := e.SDK.WithTags(map[string]string{"activity_type": "DeliverEvents"})
	sdk.Timer("temporal_activity_execution_latency").Record(30 * time.Millisecond)
	sdk.Counter("temporal_activity_execution_failed").Inc(1)
	metrics.AttemptEnded(e.SDK, "completed")
	defer e.Recorder.WatchConductor()()
	e.Recorder.Read([]mapping.Event{{Type: mapping.EventPhaseStart}}, 1)
	require.NoError(t, e.Recorder.Sink(okSink{}).PatchBrief(context.Background(), "T1", json.RawMessage(`{}`)))

	rec := httptest.NewRecorder()
	e.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	for _, want := range []string{
		`temporal_activity_execution_latency_seconds_bucket{activity_type="DeliverEvents",le="0.05"} 1`,
		`temporal_activity_execution_latency_seconds_bucket{activity_type="DeliverEvents",le="0.025"} 0`,
		`temporal_activity_execution_failed_total{activity_type="DeliverEvents"} 1`,
		`karvi_edda_attempts_ended_total{outcome="completed"} 1`,
		"karvi_edda_conductors_running 1",
		`karvi_edda_conductor_events_read_total{type="phase_start"} 1`,
		"karvi_edda_malformed_event_lines_total 1",
		"karvi_edda_brief_patch_duration_seconds_count 1",
		"# TYPE karvi_edda_conductors_running gauge",
		"go_goroutines ",
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "otel_scope_name")
}

func TestMetricsListenOnLoopbackOnly(t *testing.T) {
	e, err := newExporter(discard())
	require.NoError(t, err)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:9090"} {
		_, err := serveMetrics(addr, e, discard())
		require.ErrorContains(t, err, "only listens on loopback", addr)
	}
	shutdown, err := serveMetrics("127.0.0.1:0", e, discard())
	require.NoError(t, err)
	shutdown()
}
