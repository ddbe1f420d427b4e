// Package tracing exports the runtime's OpenTelemetry traces: the spans
// package traces describes (tasks, attempts, phase attempts, model and tool
// calls, with ids fixed in advance) and the Temporal SDK's own spans of
// workflows and activities. It is configured the standard way, by the
// OpenTelemetry environment variables, and is off when they name no
// endpoint (docs/traces.md).
package tracing

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"karvi-edda-temporal/traces"
)

// DefaultServiceName is the service of every span when OTEL_SERVICE_NAME
// (or service.name in OTEL_RESOURCE_ATTRIBUTES) does not name one.
const DefaultServiceName = "karvi-edda-temporal"

// exportTimeout bounds one synchronous export: a collector that does not
// answer costs a checkpoint this much at most, never the delivery.
const exportTimeout = 5 * time.Second

// Tracing is the process's tracing: nil is off, and every method of a nil
// *Tracing does nothing.
type Tracing struct {
	exporter sdktrace.SpanExporter
	provider *sdktrace.TracerProvider
	res      *resource.Resource
	sampler  sdktrace.Sampler
	scope    instrumentation.Scope
}

// Enabled says whether the environment asks for traces: an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER=otlp, and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv sets tracing up from the environment; nil (off) when Enabled is
// false. The exporter's endpoint, headers, TLS and timeout are the OTLP
// exporters' own environment variables; the protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL,
// http/protobuf (the default) or grpc.
func FromEnv(ctx context.Context) (*Tracing, error) {
	if !Enabled() {
		return nil, nil
	}
	exp, err := newExporter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	sampler, err := samplerFromEnv()
	if err != nil {
		return nil, err
	}
	return newTracing(exp, res, sampler), nil
}

func newTracing(exp sdktrace.SpanExporter, res *resource.Resource, sampler sdktrace.Sampler) *Tracing {
	t := &Tracing{exporter: exp, res: res, sampler: sampler,
		scope: instrumentation.Scope{Name: "karvi-edda-temporal/traces"}}
	t.provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(redacting{exp}), sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler))
	return t
}

func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch strings.TrimSpace(proto) {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_PROTOCOL %q is not supported: use http/protobuf or grpc", proto)
	}
}

// samplerFromEnv reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as
// the SDK does, so the spans exported directly (Export) are sampled as the
// provider samples Temporal's.
func samplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG %q is not a ratio from 0 to 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	default:
		return nil, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER %q is not supported", name)
	}
}

// Sampled is the sampler's decision for a trace, taken at its root: it
// depends on the trace id alone, so every span of a trace, made by any
// process, gets the same answer.
func (t *Tracing) Sampled(id trace.TraceID) bool {
	if t == nil {
		return false
	}
	r := t.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id, Name: "root"})
	return r.Decision == sdktrace.RecordAndSample
}

// TracerProvider is the provider of Temporal's spans; nil when off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Interceptor is the Temporal SDK's OpenTelemetry interceptor on this
// provider, for a client (the starter's) or a worker; nil when off.
func (t *Tracing) Interceptor() (interceptor.Interceptor, error) {
	if t == nil {
		return nil, nil
	}
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: t.provider.Tracer("temporal-sdk-go"),
		// A query reads; the Web UI, the starter's status and the run's
		// views send them all the time, each a trace of its own.
		DisableQueryTracing: true,
	})
}

// RootContext is ctx carrying the trace's root as its remote parent: a
// workflow started with it begins its spans in the trace of id. ctx is
// returned as is when tracing is off.
func (t *Tracing) RootContext(ctx context.Context, id traces.Identity) context.Context {
	if t == nil {
		return ctx
	}
	sc := id.RootContext()
	if !t.Sampled(sc.TraceID()) {
		sc = sc.WithTraceFlags(0)
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Export sends spans at once and waits for the collector's answer,
// whatever the sampler says about a trace left out. It is what makes a
// span's export a step the caller can order against its own checkpoint.
func (t *Tracing) Export(ctx context.Context, spans traces.Sealed) error {
	if t == nil || len(spans) == 0 {
		return nil
	}
	ro := make([]sdktrace.ReadOnlySpan, 0, len(spans))
	for _, s := range spans {
		if !t.Sampled(s.TraceID) {
			continue
		}
		ro = append(ro, t.stub(s).Snapshot())
	}
	if len(ro) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	if err := t.exporter.ExportSpans(ctx, ro); err != nil {
		return fmt.Errorf("tracing: export %d span(s): %w", len(ro), err)
	}
	return nil
}

func (t *Tracing) stub(s traces.Span) tracetest.SpanStub {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.TraceID, SpanID: s.SpanID, TraceFlags: trace.FlagsSampled})
	var parent trace.SpanContext
	if s.Parent.IsValid() {
		parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.TraceID, SpanID: s.Parent, TraceFlags: trace.FlagsSampled})
	}
	evs := make([]sdktrace.Event, len(s.Events))
	for i, e := range s.Events {
		evs[i] = sdktrace.Event{Name: e.Name, Time: e.Time, Attributes: e.Attrs}
	}
	st := sdktrace.Status{Code: s.Status}
	if s.Status == codes.Error {
		st.Description = s.StatusMsg
	}
	end := s.End
	if end.Before(s.Start) {
		end = s.Start
	}
	var links []sdktrace.Link
	for _, l := range s.Links {
		if l.IsValid() {
			links = append(links, sdktrace.Link{SpanContext: l})
		}
	}
	return tracetest.SpanStub{
		Name: s.Name, SpanContext: sc, Parent: parent, SpanKind: s.Kind,
		StartTime: s.Start, EndTime: end, Attributes: s.Attrs, Events: evs, Status: st, Links: links,
		Resource: t.res, InstrumentationScope: t.scope,
	}
}

// Shutdown flushes what the provider holds and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	// The provider's batcher shuts the exporter down with it.
	return t.provider.Shutdown(ctx)
}
