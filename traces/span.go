package traces

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"karvi-edda-temporal/mapping/redact"
)

// Span is one span as it will be exported: every id fixed in advance, so
// the same input always makes the same span.
type Span struct {
	TraceID trace.TraceID
	SpanID  trace.SpanID
	// Parent is the zero id for the trace's root.
	Parent     trace.SpanID
	Name       string
	Kind       trace.SpanKind
	Start, End time.Time
	Attrs      []attribute.KeyValue
	Events     []Event
	Status     codes.Code
	StatusMsg  string
	// Links are spans this one relates to without being their child: the
	// Temporal activity that delivered a phase's end. They are no part of
	// the span's identity.
	Links []trace.SpanContext
}

// Event is a span event: a pause, a stall, a check, a rate limit.
type Event struct {
	Name  string
	Time  time.Time
	Attrs []attribute.KeyValue
}

// Attribute keys: the OpenTelemetry GenAI conventions where they apply,
// karvi.* for the rest.
const (
	AttrOperation      = "gen_ai.operation.name"
	AttrProvider       = "gen_ai.provider.name"
	AttrRequestModel   = "gen_ai.request.model"
	AttrResponseModel  = "gen_ai.response.model"
	AttrResponseID     = "gen_ai.response.id"
	AttrFinishReasons  = "gen_ai.response.finish_reasons"
	AttrAgentName      = "gen_ai.agent.name"
	AttrConversationID = "gen_ai.conversation.id"
	AttrInputTokens    = "gen_ai.usage.input_tokens"
	AttrOutputTokens   = "gen_ai.usage.output_tokens"
	AttrToolName       = "gen_ai.tool.name"
	AttrToolCallID     = "gen_ai.tool.call.id"
	AttrToolType       = "gen_ai.tool.type"
	AttrToolArguments  = "gen_ai.tool.call.arguments"
	AttrToolResult     = "gen_ai.tool.call.result"
	AttrErrorType      = "error.type"

	AttrTaskID       = "karvi.task.id"
	AttrRunSlug      = "karvi.run.slug"
	AttrPlan         = "karvi.plan.name"
	AttrAttempt      = "karvi.attempt"
	AttrPhase        = "karvi.phase.id"
	AttrPhaseAttempt = "karvi.phase.attempt"
	AttrPhaseOutcome = "karvi.phase.outcome"
	AttrCostUSD      = "karvi.cost_usd"
	AttrOutcome      = "karvi.outcome"
	AttrTranscript   = "karvi.transcript"
	AttrMessage      = "karvi.message"

	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
)

// Sealed is spans whose every text went through redaction: the only
// thing an exporter takes, so no path leaves a secret in a span.
type Sealed []Span

// idKeys are the attributes that hold identifiers: opaque ids the agent's
// API or this runtime made (a tool call's, a message's, a session's, a
// task's). The redaction's long-run rule would take some of them for
// secrets; they are its allowed false positives, exactly as they are, so
// a span can still be told apart (a secret inside any other text is
// masked all the same).
var idKeys = map[attribute.Key]bool{
	AttrToolCallID: true, AttrResponseID: true, AttrConversationID: true,
	AttrTaskID: true, AttrRunSlug: true, AttrPlan: true, AttrTranscript: true,
}

// Seal masks the secrets in every string attribute, event attribute,
// name and status message, as the brief's events are masked.
func Seal(spans []Span) Sealed {
	var allow []string
	for _, s := range spans {
		for _, kv := range s.Attrs {
			if idKeys[kv.Key] && kv.Value.Type() == attribute.STRING {
				allow = append(allow, kv.Value.AsString())
			}
		}
	}
	r := redact.New(allow...)
	out := make(Sealed, len(spans))
	for i, s := range spans {
		s.Name = r.String(s.Name)
		s.StatusMsg = r.String(s.StatusMsg)
		s.Attrs = RedactAttributes(r, s.Attrs)
		evs := make([]Event, len(s.Events))
		for j, e := range s.Events {
			e.Name = r.String(e.Name)
			e.Attrs = RedactAttributes(r, e.Attrs)
			evs[j] = e
		}
		s.Events = evs
		out[i] = s
	}
	return out
}

// RedactAttributes masks the secrets in attributes' text (a nil r allows
// nothing, as redact.String): the runtime's spans when they are sealed,
// and the SDK interceptor's spans before they leave (internal/tracing).
func RedactAttributes(r *redact.Redactor, in []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(in))
	for i, kv := range in {
		switch kv.Value.Type() {
		case attribute.STRING:
			kv = attribute.String(string(kv.Key), r.String(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			ss := kv.Value.AsStringSlice()
			for k := range ss {
				ss[k] = r.String(ss[k])
			}
			kv = attribute.StringSlice(string(kv.Key), ss)
		}
		out[i] = kv
	}
	return out
}
