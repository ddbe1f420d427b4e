package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"karvi-edda-temporal/traces"
)

func spansOf(id traces.Identity, n int) []traces.Span {
	t0 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	var out []traces.Span
	for i := range n {
		out = append(out, traces.Span{TraceID: id.TraceID(), SpanID: id.AttemptSpanID(i + 1), Parent: id.TaskSpanID(),
			Name: "attempt", Start: t0, End: t0.Add(time.Second),
			Attrs: []attribute.KeyValue{attribute.String("karvi.message", "token=ghp_16C7e42F292c6912E7710c838347Ae178B4a")}})
	}
	return out
}

// failing fails its first n exports.
type failing struct {
	*tracetest.InMemoryExporter
	n int
}

func (f *failing) ExportSpans(ctx context.Context, s []sdktrace.ReadOnlySpan) error {
	if f.n > 0 {
		f.n--
		return errors.New("collector down")
	}
	return f.InMemoryExporter.ExportSpans(ctx, s)
}

func TestEmitterExportsOnce(t *testing.T) {
	mem := &failing{InMemoryExporter: tracetest.NewInMemoryExporter(), n: 1}
	tr := newTracing(mem, resource.Empty(), sdktrace.AlwaysSample())
	dir := t.TempDir()
	e := NewEmitter(tr, dir)
	id := traces.Identity{TaskID: "T5"}
	ctx := context.Background()

	if _, err := e.Emit(ctx, "run-T5", spansOf(id, 2)); err == nil {
		t.Fatal("a failed export was not reported")
	}
	if n, err := e.Emit(ctx, "run-T5", spansOf(id, 2)); err != nil || n != 2 {
		t.Fatalf("after a failed export: exported %d, %v; want both spans again", n, err)
	}
	// A retried activity makes the same spans and one more.
	if n, err := e.Emit(ctx, "run-T5", spansOf(id, 3)); err != nil || n != 1 {
		t.Fatalf("exported %d, %v; want only the new span", n, err)
	}
	got := mem.GetSpans()
	if len(got) != 3 {
		t.Fatalf("collector holds %d spans, want 3", len(got))
	}
	for _, s := range got {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "ghp_") {
				t.Errorf("a secret reached the collector: %s", kv.Value.String())
			}
		}
		if !s.SpanContext.IsSampled() || s.Parent.SpanID() != id.TaskSpanID() {
			t.Errorf("span %s: sampled %v parent %s", s.SpanContext.SpanID(), s.SpanContext.IsSampled(), s.Parent.SpanID())
		}
	}
	// A torn last line (the worker died mid-write) is no record: sent again.
	path := filepath.Join(dir, "run-T5.spans")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("0123") // no id
	f.Close()
	if n, _ := e.Emit(ctx, "run-T5", spansOf(id, 3)); n != 0 {
		t.Errorf("exported %d spans the ledger holds", n)
	}
	if _, err := e.Emit(ctx, "../x", spansOf(id, 1)); err == nil {
		t.Error("a ledger outside the directory was accepted")
	}
}

func TestNilIsOff(t *testing.T) {
	var e *Emitter
	if n, err := e.Emit(context.Background(), "x", spansOf(traces.Identity{TaskID: "T"}, 1)); n != 0 || err != nil {
		t.Errorf("a nil emitter exported %d, %v", n, err)
	}
	var tr *Tracing
	ctx := context.Background()
	if tr.RootContext(ctx, traces.Identity{TaskID: "T"}) != ctx || tr.Sampled(traces.Identity{}.TraceID()) {
		t.Error("a nil tracing changed something")
	}
}

func TestEnabledAndSampler(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	if Enabled() {
		t.Error("on with no endpoint")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
	if !Enabled() {
		t.Error("off with a traces endpoint")
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if Enabled() {
		t.Error("on with the SDK disabled")
	}
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := FromEnv(context.Background()); err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Errorf("an unsupported protocol: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	tr, err := FromEnv(context.Background())
	if err != nil || tr == nil {
		t.Fatalf("grpc: %v", err)
	}
	defer tr.Shutdown(context.Background())

	t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
	s, err := samplerFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	tr = newTracing(tracetest.NewInMemoryExporter(), resource.Empty(), s)
	in, out := 0, 0
	for i := range 200 {
		id := traces.Identity{TaskID: "T" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		a, b := tr.Sampled(id.TraceID()), tr.Sampled(id.TraceID())
		if a != b {
			t.Fatal("a trace's sampling changed between two asks")
		}
		if a {
			in++
		} else {
			out++
		}
	}
	if in == 0 || out == 0 {
		t.Errorf("ratio 0.5 sampled %d of 200", in)
	}
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "2")
	if _, err := samplerFromEnv(); err == nil {
		t.Error("a ratio of 2 was accepted")
	}
}

// The interceptor's spans (an activity's error as status and event) are
// masked on their way out too.
func TestProviderSpansAreMasked(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tr := newTracing(mem, resource.Empty(), sdktrace.AlwaysSample())
	const key = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	_, span := tr.TracerProvider().Tracer("t").Start(context.Background(), "RunActivity:SetTaskStatus")
	err := errors.New("karvi answered 401 for token " + key)
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(attribute.String("url", "https://karvi/?token="+key))
	span.End()
	if err := tr.provider.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", mem.GetSpans())
	if len(mem.GetSpans()) != 1 || strings.Contains(got, key) {
		t.Errorf("exported: %s", got)
	}
}
