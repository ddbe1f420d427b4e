package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"

	"karvi-edda-temporal/internal/metrics"
)

// exporter is the worker's metrics pipeline: the SDK's metrics and the
// worker's own, on one OpenTelemetry MeterProvider, read by a Prometheus
// registry of the worker's own (not the process-wide default, so nothing
// another package registers leaks into the scrape).
type exporter struct {
	// SDK goes to client.Options.MetricsHandler; Recorder to the
	// activities and the sink.
	SDK      client.MetricsHandler
	Recorder *metrics.Recorder
	Handler  http.Handler
	provider *sdkmetric.MeterProvider
}

func newExporter(logger *slog.Logger) (*exporter, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Names the Prometheus way (temporal_workflow_completed_total,
	// ..._latency_seconds), spelled out because the exporter's default
	// follows a process-wide setting of the Prometheus libraries. Scope
	// labels and target_info would only repeat what the scrape target says.
	prom, err := otelprom.New(otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	// The SDK's timers are histograms in seconds whose default buckets
	// (0 to 10,000) are made for milliseconds: every latency would land in
	// the first one.
	seconds := sdkmetric.NewView(
		sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: metrics.LatencyBuckets}})
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(prom), sdkmetric.WithView(seconds))
	rec, err := metrics.New(mp)
	if err != nil {
		return nil, err
	}
	sdk := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter: mp.Meter("temporal-sdk-go"),
		// Counters as counters (_total), not as gauges that happen to rise.
		UseMonotonicCounters: true,
		// The handler's default panics; a metric the meter refuses is not
		// worth a worker.
		OnError: func(err error) { logger.Warn("SDK metric not recorded", "error", err) },
	})
	return &exporter{SDK: sdk, Recorder: rec, provider: mp,
		Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}, nil
}

// serveMetrics serves /metrics in the Prometheus text format, on loopback
// only: the SDK's metrics name the task queue, workflow and activity types,
// which are for the operator of this machine (a remote Prometheus reaches
// them through an agent or a proxy on it).
func serveMetrics(addr string, e *exporter, logger *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", e.Handler)
	shutdown, err := serveLoopback("metrics", "-metrics-addr", addr, mux, logger)
	if err != nil {
		return nil, err
	}
	return func() {
		shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.provider.Shutdown(ctx)
	}, nil
}
