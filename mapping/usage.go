package mapping

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
)

// Usage is the token count one event reports.
type Usage struct {
	// Model is the model the event names, "" when it names none (the
	// dispatch's model is then assumed).
	Model        string `json:"model,omitempty"`
	InputTokens  int64  `json:"inputTokens,omitempty"`
	OutputTokens int64  `json:"outputTokens,omitempty"`
}

// MaxTokens bounds a believable count; anything larger is a garbled line.
const MaxTokens = 1 << 50

const maxModelLen = 64

// usage reads the token usage an event may carry. edda 0.3 reports none;
// conductors and agents that do write it in one of two places, both
// accepted:
//
//	{"type":"phase_passed", ..., "input_tokens":1200, "output_tokens":340, "model":"m"}
//	{"type":"phase_passed", ..., "usage":{"input_tokens":1200, "output_tokens":340, "model":"m"}}
//
// with tokens_in and tokens_out as other names of the counts (the
// canonical event's), and token_usage as another name of the object. A
// count that is not a non-negative integer is ignored, never an error: the
// event stands without it. nil when the event reports no count.
func (p *fieldParser) usage() *Usage {
	if p.fields != nil && !p.fields.anySet(firstUsageKey) {
		return nil // nearly every line: no member of a token count
	}
	if u, ok := usageIn(p.get); ok {
		return &u
	}
	for _, key := range []string{"usage", "token_usage"} {
		raw, found := p.get(key)
		if !found {
			continue
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) != nil {
			continue
		}
		u, ok := usageIn(func(k string) (json.RawMessage, bool) { v, ok := inner[k]; return v, ok })
		if !ok {
			continue
		}
		if u.Model == "" {
			m, _ := p.get("model")
			u.Model = modelName(m)
		}
		return &u
	}
	return nil
}

func usageIn(get func(string) (json.RawMessage, bool)) (Usage, bool) {
	in, okIn := tokenCount(get, "input_tokens", "tokens_in")
	out, okOut := tokenCount(get, "output_tokens", "tokens_out")
	if !okIn && !okOut {
		return Usage{}, false
	}
	m, _ := get("model")
	return Usage{Model: modelName(m), InputTokens: in, OutputTokens: out}, true
}

// tokenCount is the first of keys holding a usable count.
func tokenCount(get func(string) (json.RawMessage, bool), keys ...string) (int64, bool) {
	for _, k := range keys {
		raw, found := get(k)
		if !found {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err == nil && n >= 0 && n <= MaxTokens {
			return n, true
		}
	}
	return 0, false
}

// modelName is a printable model name of bounded length, "" for anything
// else.
func modelName(raw json.RawMessage) string {
	var s string
	if raw == nil || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	s = strings.TrimSpace(s)
	if len(s) > maxModelLen || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return ""
	}
	return s
}
