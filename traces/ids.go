package traces

import (
	"crypto/sha256"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"karvi-edda-temporal/mapping"
)

// Identity is what a trace belongs to: a run of dependent tasks, or a
// task started on its own. Every id of the trace derives from it, so any
// worker, at any retry of any activity, and after any number of
// continue-as-new, makes the same ids for the same things.
type Identity struct {
	// TaskID is the board's task id; empty for a run's own spans.
	TaskID string
	// RunSlug is the run the task belongs to; empty for a task started
	// on its own.
	RunSlug string
}

// ForTask is the identity of a task's spans. A run gives each of its tasks
// the plan id run-<slug>-<task> (runplan.Run.PlanID), which is how a task's
// activities know their run without the workflow telling them.
func ForTask(taskID, planID string) Identity {
	id := Identity{TaskID: taskID}
	if rest, ok := strings.CutPrefix(planID, "run-"); ok && taskID != "" {
		if slug, ok := strings.CutSuffix(rest, "-"+taskID); ok && slug != "" {
			id.RunSlug = slug
		}
	}
	return id
}

// ForRun is the identity of a run's own spans.
func ForRun(slug string) Identity { return Identity{RunSlug: slug} }

// hash is the first n bytes of sha256 over the parts, each ended by a NUL
// so that ("a","bc") and ("ab","c") differ.
func hash(n int, parts ...string) []byte {
	h := sha256.New()
	h.Write([]byte("karvi-edda-temporal/traces/v1\x00"))
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)[:n]
}

// TraceID is the trace of the run, or of the task when it has no run.
func (id Identity) TraceID() trace.TraceID {
	var t trace.TraceID
	if id.RunSlug != "" {
		copy(t[:], hash(16, "run", id.RunSlug))
	} else {
		copy(t[:], hash(16, "task", id.TaskID))
	}
	if !t.IsValid() {
		t[15] = 1
	}
	return t
}

// spanID derives a span id from the trace and a path of parts.
func (id Identity) spanID(parts ...string) trace.SpanID {
	t := id.TraceID()
	var s trace.SpanID
	copy(s[:], hash(8, append([]string{t.String()}, parts...)...))
	if !s.IsValid() {
		s[7] = 1
	}
	return s
}

// RootSpanID is the trace's root: the run's span, or the task's when the
// task has no run. A starter that begins the trace puts this span as the
// remote parent of the workflow's start, so Temporal's own spans hang
// under it.
func (id Identity) RootSpanID() trace.SpanID { return id.spanID("root") }

// TaskSpanID is the task's span: the root when the task has no run.
func (id Identity) TaskSpanID() trace.SpanID {
	if id.RunSlug == "" {
		return id.RootSpanID()
	}
	return id.spanID("task", id.TaskID)
}

// TaskParentID is the task span's parent: the run's span, or none.
func (id Identity) TaskParentID() trace.SpanID {
	if id.RunSlug == "" {
		return trace.SpanID{}
	}
	return id.RootSpanID()
}

// AttemptSpanID is the span of the task's attempt n.
func (id Identity) AttemptSpanID(attempt int) trace.SpanID {
	return id.spanID("task", id.TaskID, "attempt", strconv.Itoa(attempt))
}

// PhaseSpanID is the span of one phase attempt, named by the position of
// its end event in the plan's events.jsonl: a phase can run attempt 1
// again after a usage limit's retry, but no two ends share a line.
func (id Identity) PhaseSpanID(attempt int, plan string, end mapping.Position) trace.SpanID {
	return id.spanID("task", id.TaskID, "attempt", strconv.Itoa(attempt), "plan", plan,
		"phase-end", strconv.Itoa(end.Gen), strconv.FormatInt(end.Offset, 10))
}

// ChildSpanID is a span under parent, told apart by kind and key (a
// turn's index, a tool call's id).
func (id Identity) ChildSpanID(parent trace.SpanID, kind, key string) trace.SpanID {
	return id.spanID("child", parent.String(), kind, key)
}

// RootContext is the span context a starter makes the remote parent of the
// workflow it starts: the trace's root, sampled.
func (id Identity) RootContext() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: id.TraceID(), SpanID: id.RootSpanID(),
		TraceFlags: trace.FlagsSampled, Remote: true,
	})
}
