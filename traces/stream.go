package traces

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"karvi-edda-temporal/canonical"
)

// The task's and its attempts' spans come from the task's canonical event
// stream (docs/canonical.md): the workflow's steps are there, each once,
// in order, with the workflow's own time, whichever activity stored them.
// What happened between an attempt's start and end (a pause, a resume, a
// stall's note, a budget warning, a redispatch, an abort, a host lost)
// becomes an event of that attempt's span, or of the task's outside any.

type stepPayload struct {
	From       string `json:"from"`
	To         string `json:"to"`
	Trigger    string `json:"trigger"`
	Title      string `json:"title"`
	Attempt    int    `json:"attempt"`
	PlanName   string `json:"plan_name"`
	Status     string `json:"status"`
	Ended      string `json:"ended"`
	LastError  string `json:"last_error"`
	Message    string `json:"message"`
	Signal     string `json:"signal"`
	Reason     string `json:"reason"`
	SourceType string `json:"source_type"`
	Result     string `json:"result"`
	Summary    string `json:"summary"`
}

// StreamSpans makes the spans of a task's attempts that ended, and the
// task's span once the stream shows its end (completed or blocked), from
// the task's stream. Attempts still running, and a task not ended, have
// none yet. The spans are not yet sealed.
func StreamSpans(id Identity, evs []canonical.Event) []Span {
	type open struct {
		span   Span
		cost   float64
		costOK bool
	}
	var (
		task      *Span
		taskEnded bool
		attempts  = map[int]*open{}
		order     []int
		current   = 0
		loose     []Event // events before the task's start is known
		total     float64
		anyCost   bool
	)
	traceID := id.TraceID()
	common := func(attempt int) []attribute.KeyValue {
		a := []attribute.KeyValue{attribute.String(AttrTaskID, id.TaskID)}
		if id.RunSlug != "" {
			a = append(a, attribute.String(AttrRunSlug, id.RunSlug))
		}
		if attempt > 0 {
			a = append(a, attribute.Int(AttrAttempt, attempt))
		}
		return a
	}
	addEvent := func(e Event) {
		if o, ok := attempts[current]; ok && current > 0 && o.span.End.IsZero() {
			o.span.Events = append(o.span.Events, e)
			return
		}
		if task != nil {
			task.Events = append(task.Events, e)
			return
		}
		loose = append(loose, e)
	}
	for _, ev := range evs {
		if ev.AgentID != canonical.WorkflowAgent {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, ev.TS)
		if err != nil {
			continue
		}
		var p stepPayload
		_ = json.Unmarshal(ev.Payload, &p)
		switch {
		case ev.Type == canonical.TypeStateChange && p.Trigger == string(canonical.StepTaskStarted):
			if task == nil {
				task = &Span{TraceID: traceID, SpanID: id.TaskSpanID(), Parent: id.TaskParentID(),
					Name: "task " + id.TaskID, Kind: trace.SpanKindInternal, Start: at,
					Attrs: common(0), Events: loose}
				if p.Title != "" {
					task.Attrs = append(task.Attrs, attribute.String(AttrMessage, p.Title))
				}
				loose = nil
			}
		case ev.Type == canonical.TypeTaskSpawn && p.Attempt > 0:
			if _, seen := attempts[p.Attempt]; !seen {
				order = append(order, p.Attempt)
				attempts[p.Attempt] = &open{span: Span{TraceID: traceID, SpanID: id.AttemptSpanID(p.Attempt),
					Parent: id.TaskSpanID(), Name: fmt.Sprintf("attempt %d", p.Attempt),
					Kind: trace.SpanKindInternal, Start: at,
					Attrs: append(common(p.Attempt), attribute.String(AttrPlan, p.PlanName))}}
			}
			current = p.Attempt
		case ev.Type == canonical.TypeTaskUpdate && p.Ended != "":
			o, ok := attempts[p.Attempt]
			if !ok || !o.span.End.IsZero() {
				continue
			}
			o.span.End = at
			o.span.Attrs = append(o.span.Attrs, attribute.String(AttrOutcome, p.Ended))
			if p.Ended == "completed" {
				o.span.Status = codes.Ok
			} else {
				o.span.Status, o.span.StatusMsg = codes.Error, firstOf(p.LastError, p.Ended)
				o.span.Attrs = append(o.span.Attrs, attribute.String(AttrErrorType, p.Ended))
			}
			if ev.Metrics != nil && ev.Metrics.CostUSD != nil {
				o.cost, o.costOK = *ev.Metrics.CostUSD, true
				total += o.cost
				anyCost = true
				o.span.Attrs = append(o.span.Attrs, attribute.Float64(AttrCostUSD, o.cost))
			}
			if strings.Contains(p.Ended, "host") {
				o.span.Events = append(o.span.Events, Event{Name: "host_lost", Time: at,
					Attrs: []attribute.KeyValue{attribute.String(AttrMessage, firstOf(p.LastError, p.Message))}})
			}
		case ev.Type == canonical.TypeTaskDone && (p.Status == "completed" || p.Status == "blocked"):
			if task == nil || taskEnded {
				continue
			}
			taskEnded = true
			task.End = at
			task.Attrs = append(task.Attrs, attribute.String(AttrOutcome, p.Status))
			if p.Status == "completed" {
				task.Status = codes.Ok
			} else {
				task.Status, task.StatusMsg = codes.Error, firstOf(p.Summary, p.Status)
			}
		default:
			if e, ok := stepEvent(ev, p, at); ok {
				addEvent(e)
			}
		}
	}
	var out []Span
	for _, n := range order {
		if o := attempts[n]; !o.span.End.IsZero() {
			out = append(out, o.span)
		}
	}
	if task != nil && taskEnded {
		if anyCost {
			task.Attrs = append(task.Attrs, attribute.Float64(AttrCostUSD, total))
		}
		out = append(out, *task)
	}
	return out
}

// stepEvent is a workflow step that is an event of a span, not a span's
// start or end.
func stepEvent(ev canonical.Event, p stepPayload, at time.Time) (Event, bool) {
	msg := firstOf(p.Message, p.Reason, p.Summary)
	var name string
	switch {
	case ev.Type == canonical.TypeReplan:
		name = "redispatch"
	case ev.Type == canonical.TypeMessage && p.Signal != "":
		name = p.Signal
	case ev.Type == canonical.TypeMessage && p.SourceType != "":
		name = p.SourceType // a note: budget, stall, sweep, ...
	case ev.Type == canonical.TypeStateChange && p.Trigger == "usage_limit":
		name, msg = "paused", "usage limit"
	case ev.Type == canonical.TypeStateChange && p.Trigger != "":
		name = p.Trigger
	case ev.Type == canonical.TypeTaskUpdate && p.Status != "":
		name = "status " + p.Status
	default:
		return Event{}, false
	}
	e := Event{Name: name, Time: at}
	if msg != "" {
		e.Attrs = []attribute.KeyValue{attribute.String(AttrMessage, msg)}
	}
	return e, true
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// RunSpans makes the run's span once its stream (canonical.RunIDForRun)
// shows its end (complete or partial); none before. The run's own pauses,
// resumes and budget notes are its events; its tasks have spans of their
// own, from their own streams.
func RunSpans(slug string, evs []canonical.Event) []Span {
	id := ForRun(slug)
	var run *Span
	waiting := false
	for _, ev := range evs {
		if ev.AgentID != canonical.RunAgent {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, ev.TS)
		if err != nil {
			continue
		}
		var p stepPayload
		_ = json.Unmarshal(ev.Payload, &p)
		if run == nil {
			run = &Span{TraceID: id.TraceID(), SpanID: id.RootSpanID(), Name: "run " + slug,
				Kind: trace.SpanKindInternal, Start: at, Attrs: []attribute.KeyValue{attribute.String(AttrRunSlug, slug)}}
		}
		switch {
		case ev.Type == canonical.TypeTaskDone:
			run.End = at
			outcome := "complete"
			if p.Result == "partial" {
				outcome = "partial"
				run.Status, run.StatusMsg = codes.Error, firstOf(p.Summary, "some tasks did not complete")
			} else {
				run.Status = codes.Ok
			}
			run.Attrs = append(run.Attrs, attribute.String(AttrOutcome, outcome))
			return []Span{*run}
		case ev.State == canonical.StateWaiting && !waiting:
			waiting = true
			run.Events = append(run.Events, Event{Name: "paused", Time: at, Attrs: msgAttrs(firstOf(p.Reason, p.Message))})
		case ev.State == canonical.StateRunning && waiting && ev.Type == canonical.TypeStateChange:
			waiting = false
			run.Events = append(run.Events, Event{Name: "resumed", Time: at})
		case ev.Type == canonical.TypeMessage:
			run.Events = append(run.Events, Event{Name: firstOf(p.SourceType, "message"), Time: at, Attrs: msgAttrs(p.Message)})
		}
	}
	return nil
}

func msgAttrs(msg string) []attribute.KeyValue {
	if msg == "" {
		return nil
	}
	return []attribute.KeyValue{attribute.String(AttrMessage, msg)}
}
