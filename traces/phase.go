package traces

import (
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"karvi-edda-temporal/mapping"
)

// PhaseRun is one phase attempt as its end event and transcript tell it.
type PhaseRun struct {
	ID Identity
	// Attempt is the task's attempt, Plan its plan name.
	Attempt int
	Plan    string
	// End is the phase_passed, phase_failed or phase_skipped event.
	End mapping.Event
	// Seen is when the end was read: the end's time when the event has no
	// timestamp of its own.
	Seen time.Time
	// Model is the model asked for (the dispatch's model hint), Provider
	// the agent's provider ("anthropic" when empty).
	Model, Provider string
	// Transcript is the attempt's transcript, nil when it left none;
	// TranscriptName its file name.
	Transcript     *Transcript
	TranscriptName string
}

// IsPhaseEnd says whether an event ends a phase attempt.
func IsPhaseEnd(typ string) bool {
	switch typ {
	case mapping.EventPhasePassed, mapping.EventPhaseFailed, mapping.EventPhaseSkipped:
		return true
	}
	return false
}

// Cost is what the phase attempt spent: its transcript's closing total
// (what the brief counts per phase), else the end event's.
func (r PhaseRun) Cost() (float64, bool) {
	if r.Transcript != nil && r.Transcript.Result != nil && r.Transcript.Result.CostUSD != nil {
		return *r.Transcript.Result.CostUSD, true
	}
	if r.End.CostUSD != nil {
		return *r.End.CostUSD, true
	}
	return 0, false
}

// Window is when the phase attempt ran: it ended at the end event's time
// and began its duration earlier.
func (r PhaseRun) Window() (start, end time.Time) {
	end = r.Seen
	if t, err := time.Parse(time.RFC3339Nano, r.End.TS); err == nil {
		end = t
	}
	start = end.Add(-time.Duration(max(r.End.DurationMS, 0)) * time.Millisecond)
	return start, end
}

// SpanID is the phase attempt's span.
func (r PhaseRun) SpanID() trace.SpanID { return r.ID.PhaseSpanID(r.Attempt, r.Plan, r.End.Pos) }

// PhaseSpans makes the phase attempt's span (invoke_agent, under the
// attempt's span) and, from its transcript, a span per model call (chat)
// and per tool call (execute_tool) under it. Checks and rate limits are
// the phase span's events. The spans are not yet sealed.
func PhaseSpans(r PhaseRun) []Span {
	start, end := r.Window()
	provider := r.Provider
	if provider == "" {
		provider = "anthropic"
	}
	t := r.Transcript
	model := r.Model
	if model == "" && t != nil {
		model = t.Model
	}
	phaseID := r.SpanID()
	common := []attribute.KeyValue{
		attribute.String(AttrTaskID, r.ID.TaskID),
		attribute.String(AttrPlan, r.Plan),
		attribute.Int(AttrAttempt, r.Attempt),
		attribute.String(AttrPhase, r.End.PhaseID),
		attribute.Int(AttrPhaseAttempt, r.End.Attempt),
	}
	if r.ID.RunSlug != "" {
		common = append(common, attribute.String(AttrRunSlug, r.ID.RunSlug))
	}
	attrs := append(append([]attribute.KeyValue{}, common...),
		attribute.String(AttrOperation, OpInvokeAgent),
		attribute.String(AttrProvider, provider),
		attribute.String(AttrAgentName, r.End.PhaseID),
		attribute.String(AttrPhaseOutcome, outcomeOf(r.End.Type)),
	)
	if model != "" {
		attrs = append(attrs, attribute.String(AttrRequestModel, model))
	}
	if c, ok := r.Cost(); ok {
		attrs = append(attrs, attribute.Float64(AttrCostUSD, c))
	}
	span := Span{
		TraceID: r.ID.TraceID(), SpanID: phaseID, Parent: r.ID.AttemptSpanID(r.Attempt),
		Name: OpInvokeAgent + " " + r.End.PhaseID, Kind: trace.SpanKindInternal,
		Start: start, End: end,
	}
	switch r.End.Type {
	case mapping.EventPhasePassed:
		span.Status = codes.Ok
		span.Events = append(span.Events, Event{Name: "check", Time: end,
			Attrs: []attribute.KeyValue{attribute.String("karvi.check.result", "pass")}})
	case mapping.EventPhaseFailed:
		span.Status, span.StatusMsg = codes.Error, r.End.Error
		etype := r.End.ErrorType
		if etype == "" {
			etype = "phase_failed"
		}
		attrs = append(attrs, attribute.String(AttrErrorType, etype))
		if etype == "check_failed" {
			span.Events = append(span.Events, Event{Name: "check", Time: end,
				Attrs: []attribute.KeyValue{attribute.String("karvi.check.result", "fail"),
					attribute.String(AttrMessage, r.End.Error)}})
		}
	case mapping.EventPhaseSkipped:
		if r.End.Reason != "" {
			attrs = append(attrs, attribute.String(AttrMessage, r.End.Reason))
		}
	}
	if t == nil {
		span.Attrs = attrs
		return []Span{span}
	}
	if r.TranscriptName != "" {
		attrs = append(attrs, attribute.String(AttrTranscript, r.TranscriptName))
	}
	if t.Session != "" {
		attrs = append(attrs, attribute.String(AttrConversationID, t.Session))
	}
	at := t.Place(start, end)
	lineAt := func(i int) time.Time {
		if i >= 0 && i < len(at) {
			return at[i]
		}
		return end
	}
	out := []Span{{}}
	var in, outTok int64
	for k, tu := range t.Turns {
		in += tu.InputTokens
		outTok += tu.OutputTokens
		from := start
		if tu.Line > 0 {
			from = lineAt(tu.Line - 1)
		}
		m := tu.Model
		if m == "" {
			m = model
		}
		a := append(append([]attribute.KeyValue{}, common...),
			attribute.String(AttrOperation, OpChat),
			attribute.String(AttrProvider, provider),
			attribute.Int64(AttrInputTokens, tu.InputTokens),
			attribute.Int64(AttrOutputTokens, tu.OutputTokens),
		)
		if model != "" {
			a = append(a, attribute.String(AttrRequestModel, model))
		}
		if tu.Model != "" {
			a = append(a, attribute.String(AttrResponseModel, tu.Model))
		}
		if tu.MessageID != "" {
			a = append(a, attribute.String(AttrResponseID, tu.MessageID))
		}
		if tu.Stop != "" {
			a = append(a, attribute.StringSlice(AttrFinishReasons, []string{tu.Stop}))
		}
		if tu.Text != "" {
			a = append(a, attribute.String(AttrMessage, tu.Text))
		}
		name := OpChat
		if m != "" {
			name += " " + m
		}
		out = append(out, Span{
			TraceID: span.TraceID, SpanID: r.ID.ChildSpanID(phaseID, "turn", strconv.Itoa(k)), Parent: phaseID,
			Name: name, Kind: trace.SpanKindClient, Start: from, End: lineAt(tu.Last), Attrs: a,
		})
	}
	for _, tc := range t.Tools {
		a := append(append([]attribute.KeyValue{}, common...),
			attribute.String(AttrOperation, OpExecuteTool),
			attribute.String(AttrToolName, tc.Name),
			attribute.String(AttrToolCallID, tc.ID),
			attribute.String(AttrToolType, "function"),
		)
		if tc.Input != "" {
			a = append(a, attribute.String(AttrToolArguments, tc.Input))
		}
		if tc.Output != "" {
			a = append(a, attribute.String(AttrToolResult, tc.Output))
		}
		s := Span{
			TraceID: span.TraceID, SpanID: r.ID.ChildSpanID(phaseID, "tool", tc.ID), Parent: phaseID,
			Name: OpExecuteTool + " " + tc.Name, Kind: trace.SpanKindInternal,
			Start: lineAt(tc.Line), End: lineAt(tc.ResultLine),
		}
		switch {
		case tc.ResultLine < 0:
			s.End = end
			s.Status, s.StatusMsg = codes.Error, "no result: the agent stopped first"
			a = append(a, attribute.String(AttrErrorType, "no_result"))
		case tc.IsError:
			s.Status, s.StatusMsg = codes.Error, tc.Output
			a = append(a, attribute.String(AttrErrorType, "tool_error"))
		}
		s.Attrs = a
		out = append(out, s)
	}
	if res := t.Result; res != nil {
		in, outTok = res.InputTokens, res.OutputTokens
		if res.IsError {
			span.Events = append(span.Events, Event{Name: "agent_error", Time: lineAt(res.Line),
				Attrs: []attribute.KeyValue{attribute.String("karvi.result.subtype", res.Subtype),
					attribute.Int("karvi.result.api_error_status", res.APIErrorStatus),
					attribute.String(AttrMessage, res.Text)}})
		}
	}
	attrs = append(attrs, attribute.Int64(AttrInputTokens, in), attribute.Int64(AttrOutputTokens, outTok))
	for _, l := range t.Limits {
		span.Events = append(span.Events, Event{Name: "rate_limit", Time: lineAt(l.Line),
			Attrs: []attribute.KeyValue{attribute.String("karvi.rate_limit.status", l.Status),
				attribute.String("karvi.rate_limit.type", l.Type),
				attribute.Int64("karvi.rate_limit.resets_at", l.ResetsAt)}})
	}
	span.Attrs = attrs
	out[0] = span
	return out
}

func outcomeOf(typ string) string {
	switch typ {
	case mapping.EventPhasePassed:
		return "passed"
	case mapping.EventPhaseFailed:
		return "failed"
	case mapping.EventPhaseSkipped:
		return "skipped"
	}
	return typ
}
