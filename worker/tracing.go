package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"karvi-edda-temporal/internal/temporalconn"
	"karvi-edda-temporal/internal/tracing"
)

// setupTracing turns traces on when the OpenTelemetry environment asks
// (docs/traces.md): the SDK's interceptor on the client, and the emitter of
// the tasks' spans, whose ledgers live beside the event streams every
// worker of a fleet shares. The returned stop flushes what is left.
func setupTracing(ctx context.Context, conn *temporalconn.Config, eventsDir string, logger *slog.Logger) (*tracing.Emitter, func(), error) {
	t, err := tracing.Setup(ctx, &conn.Options)
	if err != nil || t == nil {
		return nil, func() {}, err
	}
	logger.Info("traces on: exporting by OTLP as the OTEL_* environment says")
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			logger.Warn("traces not all flushed", "error", err)
		}
	}
	return tracing.NewEmitter(t, filepath.Join(eventsDir, ".traces")), stop, nil
}
