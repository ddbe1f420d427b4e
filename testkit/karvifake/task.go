package karvifake

import (
	"encoding/json"
	"regexp"
)

// idPattern is karvi's brief route id pattern [\w-]+.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// task is a task's state as karvi's board would hold it.
type task struct {
	id, title, status string
	briefPath         string         // "" = none
	brief             map[string]any // nil = brief file absent
	blocker           any            // task.blocker; nil with blockerSet = null
	blockerSet        bool
	result            any
	childSessionKey   any
	dispatch          any
	startedAt         string
	completedAt       string
	reviewAttempts    *int
	history           []any
	fields            map[string]any // more fields, rendered as they are
}

// render is the task as GET /api/tasks shows it.
func (t *task) render() map[string]any {
	m := map[string]any{}
	for k, v := range t.fields {
		m[k] = v
	}
	m["id"], m["status"] = t.id, t.status
	if t.title != "" {
		m["title"] = t.title
	}
	if t.briefPath != "" {
		m["briefPath"] = t.briefPath
	}
	if t.blockerSet || t.blocker != nil {
		m["blocker"] = t.blocker
	}
	if t.result != nil {
		m["result"] = t.result
	}
	if t.childSessionKey != nil {
		m["childSessionKey"] = t.childSessionKey
	}
	if t.dispatch != nil {
		m["dispatch"] = t.dispatch
	}
	if t.startedAt != "" {
		m["startedAt"] = t.startedAt
	}
	if t.completedAt != "" {
		m["completedAt"] = t.completedAt
	}
	if t.reviewAttempts != nil {
		m["reviewAttempts"] = *t.reviewAttempts
	}
	if t.history != nil {
		m["history"] = t.history
	}
	return m
}

// export is the task as the test helpers return it.
func (t *task) export() Task {
	out := Task{
		ID:          t.id,
		Title:       t.title,
		Status:      t.status,
		BriefPath:   t.briefPath != "",
		Result:      rawOrNil(t.result),
		Dispatch:    rawOrNil(t.dispatch),
		StartedAt:   t.startedAt,
		CompletedAt: t.completedAt,
		Fields:      copyFields(t.fields),
	}
	if t.brief != nil {
		out.Brief, _ = json.Marshal(t.brief)
	}
	if t.blockerSet || t.blocker != nil {
		out.BlockerRaw, _ = json.Marshal(t.blocker)
	}
	if b, ok := t.blocker.(map[string]any); ok {
		out.Blocker = &Blocker{Type: strOf(b["type"]), Reason: strOf(b["reason"]), AskedAt: strOf(b["askedAt"])}
	}
	for _, h := range t.history {
		raw, _ := json.Marshal(h)
		out.History = append(out.History, raw)
	}
	return out
}

func rawOrNil(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

func strOf(v any) string {
	s, _ := v.(string)
	return s
}
