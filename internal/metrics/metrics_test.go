package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/mapping"
)

// reading is one collection from a manual reader, looked up by instrument
// name and attributes.
type reading map[string]metricdata.Aggregation

func collect(t *testing.T, rd *sdkmetric.ManualReader) reading {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, rd.Collect(context.Background(), &rm))
	out := reading{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum is the value of a counter or up-down counter's point with exactly
// attrs (key, value, key, value...); ok is false when there is none.
func (r reading) sum(name string, attrs ...string) (v int64, ok bool) {
	s, isSum := r[name].(metricdata.Sum[int64])
	if !isSum {
		return 0, false
	}
	want := attrSet(attrs...)
	for _, p := range s.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Value, true
		}
	}
	return 0, false
}

func (r reading) histogramCount(name string) uint64 {
	h, ok := r[name].(metricdata.Histogram[float64])
	if !ok {
		return 0
	}
	var n uint64
	for _, p := range h.DataPoints {
		n += p.Count
	}
	return n
}

func attrSet(kv ...string) attribute.Set {
	var as []attribute.KeyValue
	for i := 0; i+1 < len(kv); i += 2 {
		as = append(as, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(as...)
}

func newRecorder(t *testing.T) (*Recorder, *sdkmetric.ManualReader) {
	t.Helper()
	rd := sdkmetric.NewManualReader()
	r, err := New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd)))
	require.NoError(t, err)
	return r, rd
}

func TestConductorsRunningFollowsTheTails(t *testing.T) {
	r, rd := newRecorder(t)
	a := r.WatchConductor()
	b := r.WatchConductor()
	v, _ := collect(t, rd).sum(ConductorsRunning)
	require.EqualValues(t, 2, v)
	a()
	v, _ = collect(t, rd).sum(ConductorsRunning)
	require.EqualValues(t, 1, v)
	b()
	v, ok := collect(t, rd).sum(ConductorsRunning)
	require.True(t, ok, "a gauge back at zero is still exported")
	require.EqualValues(t, 0, v)
}

func TestReadCountsEventsByBoundedTypeAndMalformedLines(t *testing.T) {
	r, rd := newRecorder(t)
	ev := func(typ string) mapping.Event { return mapping.Event{Type: typ} }
	r.Read([]mapping.Event{ev(mapping.EventPlanStart), ev(mapping.EventPhaseStart), ev(mapping.EventPhaseStart)}, 0)
	r.Read([]mapping.Event{ev("gate_entered"), ev("made_up_by_a_newer_conductor"), ev("another_one")}, 3)
	r.Read(nil, 1)

	got := collect(t, rd)
	for typ, want := range map[string]int64{
		mapping.EventPlanStart: 1, mapping.EventPhaseStart: 2, "gate_entered": 1, otherEvent: 2,
	} {
		v, ok := got.sum(EventsRead, "type", typ)
		require.True(t, ok, "type %s", typ)
		require.Equal(t, want, v, "type %s", typ)
	}
	_, ok := got.sum(EventsRead, "type", "made_up_by_a_newer_conductor")
	require.False(t, ok, "an unknown type gets no label of its own")
	v, _ := got.sum(MalformedLines)
	require.EqualValues(t, 4, v)
}

// fakeSink answers each call with the next error of its list (nil: ok).
type fakeSink struct{ errs []error }

func (f *fakeSink) next() error {
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func (f *fakeSink) PatchBrief(context.Context, string, json.RawMessage) error { return f.next() }

func (f *fakeSink) SetStatus(context.Context, string, sink.StatusUpdate) error { return f.next() }

func (f *fakeSink) CurrentBrief(context.Context, string) (map[string]any, error) {
	return nil, f.next()
}

func TestSinkMeasuresPatchesAndCountsFailuresByKind(t *testing.T) {
	r, rd := newRecorder(t)
	transient := &karvi.Error{Op: "PATCH /api/brief/T1", Kind: karvi.KindTransient, Status: 503}
	fake := &fakeSink{errs: []error{
		nil, nil, transient, // three patches, the last refused
		karvi.IllegalTransitionError("set status", "completed", "dispatched"),
		errors.New("open brief.json: permission denied"),
		transient, // on a cancelled call: not counted
	}}
	s := r.Sink(fake)
	ctx := context.Background()
	require.NoError(t, s.PatchBrief(ctx, "T1", json.RawMessage(`{}`)))
	require.NoError(t, s.PatchBrief(ctx, "T1", json.RawMessage(`{}`)))
	require.ErrorIs(t, s.PatchBrief(ctx, "T1", json.RawMessage(`{}`)), transient, "errors pass through unchanged")
	require.True(t, karvi.IsIllegalTransition(s.SetStatus(ctx, "T1", sink.StatusUpdate{Status: "dispatched"})))
	_, err := s.CurrentBrief(ctx, "T1")
	require.Error(t, err)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, s.PatchBrief(cancelled, "T1", json.RawMessage(`{}`)))

	got := collect(t, rd)
	require.EqualValues(t, 2, got.histogramCount(BriefPatchDuration), "acknowledged patches only")
	for _, c := range []struct{ op, kind string }{
		{opPatchBrief, KindUnavailable}, {opSetStatus, KindIllegalTransition}, {opReadBrief, KindOther},
	} {
		v, ok := got.sum(SinkErrors, "kind", c.kind, "op", c.op)
		require.True(t, ok, "%s %s", c.op, c.kind)
		require.EqualValues(t, 1, v, "%s %s", c.op, c.kind)
	}
}

func TestKindOfEveryKarviFailure(t *testing.T) {
	for k, want := range map[karvi.Kind]string{
		karvi.KindTransient: KindUnavailable, karvi.KindNoBrief: KindNoBrief, karvi.KindNotFound: KindNotFound,
		karvi.KindIllegalTransition: KindIllegalTransition, karvi.KindUnauthorized: KindUnauthorized,
		karvi.KindBadRequest: KindRejected,
	} {
		err := &karvi.Error{Op: "x", Kind: k}
		require.Equal(t, want, Kind(err), "%s", k)
		require.Equal(t, want, Kind(errors.Join(errors.New("wrapped"), err)), "%s wrapped", k)
	}
	require.Equal(t, KindOther, Kind(errors.New("disk full")))
}

// Metrics off is a nil Recorder: every hook is safe and the sink is the
// one given.
func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *Recorder
	r.WatchConductor()()
	r.Read([]mapping.Event{{Type: mapping.EventPhaseStart}}, 2)
	fake := &fakeSink{}
	require.Same(t, sink.Sink(fake), r.Sink(fake))
}

// The workflow's counters go through the SDK's handler, here the
// OpenTelemetry one the worker uses.
func TestAttemptsThroughTheSDKHandler(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	h := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter: mp.Meter("test"), UseMonotonicCounters: true})
	AttemptStarted(h)
	AttemptStarted(h)
	AttemptEnded(h, "redispatched")
	AttemptEnded(h, "completed")
	Stalled(h, "warn")
	Stalled(h, "warn")

	got := collect(t, rd)
	v, _ := got.sum(AttemptsStarted)
	require.EqualValues(t, 2, v)
	for _, outcome := range []string{"redispatched", "completed"} {
		v, ok := got.sum(AttemptsEnded, "outcome", outcome)
		require.True(t, ok, outcome)
		require.EqualValues(t, 1, v, outcome)
	}
	v, ok := got.sum(PhaseStalls, "action", "warn")
	require.True(t, ok)
	require.EqualValues(t, 2, v)
}

// A pool's gauges go through the SDK's handler too, by pool, and follow
// the pool as it changes.
func TestPoolGaugesThroughTheSDKHandler(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	h := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{Meter: mp.Meter("test")})
	Pool(h, "agents", 4, 7, 4)
	Pool(h, "agents", 3, 6, 4)
	Pool(h, "review", 1, 0, 2)

	got := collect(t, rd)
	gauge := func(name, pool string) float64 {
		t.Helper()
		g, ok := got[name].(metricdata.Gauge[float64])
		require.True(t, ok, "%s is %T", name, got[name])
		want := attrSet("pool", pool)
		for _, p := range g.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value
			}
		}
		t.Fatalf("%s has no point for pool %s", name, pool)
		return 0
	}
	require.EqualValues(t, 3, gauge(SlotsHeld, "agents"))
	require.EqualValues(t, 6, gauge(SlotsWaiting, "agents"))
	require.EqualValues(t, 4, gauge(SlotsMax, "agents"))
	require.EqualValues(t, 1, gauge(SlotsHeld, "review"))
}
