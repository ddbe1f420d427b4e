package tracing

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"karvi-edda-temporal/mapping/redact"
	"karvi-edda-temporal/traces"
)

// redacting masks secrets in the spans the SDK's interceptor makes before
// they leave: an activity's error (a sink's answer, a command's output)
// becomes the span's status and an exception event, and may hold a token.
// The runtime's own spans are sealed when they are made (traces.Seal).
type redacting struct {
	sdktrace.SpanExporter
}

func (r redacting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		st := tracetest.SpanStubFromReadOnlySpan(s)
		st.Name = redact.String(st.Name)
		st.Status.Description = redact.String(st.Status.Description)
		st.Attributes = traces.RedactAttributes(nil, st.Attributes)
		for k := range st.Events {
			st.Events[k].Name = redact.String(st.Events[k].Name)
			st.Events[k].Attributes = traces.RedactAttributes(nil, st.Events[k].Attributes)
		}
		out[i] = st.Snapshot()
	}
	return r.SpanExporter.ExportSpans(ctx, out)
}
