package metrics

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/sink"
)

// The kinds of sink failure, the kind label of SinkErrors.
const (
	// KindUnavailable: karvi unreachable or overloaded (refused, timed
	// out, 408, 429, 5xx); delivery retries it.
	KindUnavailable = "unavailable"
	// KindNoBrief: karvi has no brief for the task (404 "no brief for this
	// task"); the task's brief is not delivered.
	KindNoBrief = "no_brief"
	// KindNotFound: no such task (or route) in karvi.
	KindNotFound = "not_found"
	// KindIllegalTransition: a status karvi cannot reach from the task's.
	KindIllegalTransition = "illegal_transition"
	// KindUnauthorized: karvi refused the token or its role.
	KindUnauthorized = "unauthorized"
	// KindRejected: any other refusal (400, input refused before sending).
	KindRejected = "rejected"
	// KindOther: not an answer from karvi: the file sink's file system, a
	// brief that does not decode.
	KindOther = "other"
)

// The ops of SinkErrors.
const (
	opPatchBrief = "patch_brief"
	opSetStatus  = "set_status"
	opReadBrief  = "read_brief"
)

// Kind is the kind label of a sink failure.
func Kind(err error) string {
	switch karvi.KindOf(err) {
	case karvi.KindTransient, karvi.KindConflict:
		return KindUnavailable
	case karvi.KindNoBrief:
		return KindNoBrief
	case karvi.KindNotFound:
		return KindNotFound
	case karvi.KindIllegalTransition:
		return KindIllegalTransition
	case karvi.KindUnauthorized:
		return KindUnauthorized
	case karvi.KindBadRequest:
		return KindRejected
	}
	return KindOther
}

// Sink returns s with its calls measured: the round trip of every
// acknowledged brief PATCH, and every failure by op and kind. Measuring at
// the sink, not in the activities, sees every write whichever path made
// it (the tail, the settling patch, a status). A nil Recorder returns s.
func (r *Recorder) Sink(s sink.Sink) sink.Sink {
	if r == nil {
		return s
	}
	return &measuredSink{s: s, r: r}
}

type measuredSink struct {
	s sink.Sink
	r *Recorder
}

func (m *measuredSink) PatchBrief(ctx context.Context, taskID string, body json.RawMessage) error {
	start := time.Now()
	err := m.s.PatchBrief(ctx, taskID, body)
	if err == nil {
		m.r.patch.Record(context.Background(), time.Since(start).Seconds())
	}
	m.r.sinkFailed(ctx, opPatchBrief, err)
	return err
}

// CanReplace passes on the wrapped sink's (sink.Replacer).
func (m *measuredSink) CanReplace() bool { return sink.CanReplace(m.s) }

// ReplaceBrief is measured as a brief PATCH: it stands for one.
func (m *measuredSink) ReplaceBrief(ctx context.Context, taskID string, body json.RawMessage) error {
	start := time.Now()
	err := sink.ReplaceBrief(ctx, m.s, taskID, body)
	if err == nil {
		m.r.patch.Record(context.Background(), time.Since(start).Seconds())
	}
	m.r.sinkFailed(ctx, opPatchBrief, err)
	return err
}

// Congested passes on the wrapped sink's (sink.Congestion).
func (m *measuredSink) Congested() bool { return sink.Congested(m.s) }

// Attend passes on the wrapped sink's (sink.Attendance).
func (m *measuredSink) Attend() (done func()) { return sink.Attend(m.s) }

func (m *measuredSink) SetStatus(ctx context.Context, taskID string, u sink.StatusUpdate) error {
	err := m.s.SetStatus(ctx, taskID, u)
	m.r.sinkFailed(ctx, opSetStatus, err)
	return err
}

func (m *measuredSink) CurrentBrief(ctx context.Context, taskID string) (map[string]any, error) {
	b, err := m.s.CurrentBrief(ctx, taskID)
	m.r.sinkFailed(ctx, opReadBrief, err)
	return b, err
}

// sinkFailed counts err unless the caller gave up first: a cancelled
// activity's last call says nothing about the sink.
func (r *Recorder) sinkFailed(ctx context.Context, op string, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	r.sinkErrors.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("op", op), attribute.String("kind", Kind(err))))
}
