package jobview

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
)

// Usage is the token count one event line reports.
type Usage struct {
	// Model is the model the line names, "" when it names none (the
	// dispatch's model is then assumed).
	Model        string `json:"model,omitempty"`
	InputTokens  int64  `json:"inputTokens,omitempty"`
	OutputTokens int64  `json:"outputTokens,omitempty"`
}

// maxTokens bounds a believable count; anything larger is a garbled line.
const maxTokens = 1 << 50

const maxModelLen = 64

// ParseUsage reads the token usage an event line may carry. edda 0.3
// reports none; conductors and agents that do write it in one of two
// places, both accepted:
//
//	{"type":"phase_passed", ..., "input_tokens":1200, "output_tokens":340, "model":"m"}
//	{"type":"phase_passed", ..., "usage":{"input_tokens":1200, "output_tokens":340, "model":"m"}}
//
// with tokens_in and tokens_out as other names of the counts (the
// canonical event's), and token_usage as another name of the object. A
// count that is not a non-negative integer is ignored, as is a line that
// is not a JSON object; ok is false when the line reports no count.
func ParseUsage(line []byte) (u Usage, ok bool) {
	// Nearly every line carries no tokens: skip the decode.
	if !bytes.Contains(line, []byte("tokens")) {
		return Usage{}, false
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(line, &top); err != nil {
		return Usage{}, false
	}
	u, ok = usageIn(top)
	for _, key := range []string{"usage", "token_usage"} {
		if ok {
			break
		}
		var inner map[string]json.RawMessage
		if raw, found := top[key]; found && json.Unmarshal(raw, &inner) == nil {
			u, ok = usageIn(inner)
			if ok && u.Model == "" {
				u.Model = modelName(top["model"])
			}
		}
	}
	return u, ok
}

func usageIn(obj map[string]json.RawMessage) (Usage, bool) {
	in, okIn := count(obj, "input_tokens", "tokens_in")
	out, okOut := count(obj, "output_tokens", "tokens_out")
	if !okIn && !okOut {
		return Usage{}, false
	}
	return Usage{Model: modelName(obj["model"]), InputTokens: in, OutputTokens: out}, true
}

// count is the first of keys holding a usable count.
func count(obj map[string]json.RawMessage, keys ...string) (int64, bool) {
	for _, k := range keys {
		raw, found := obj[k]
		if !found {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err == nil && n >= 0 && n <= maxTokens {
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

// add folds v into u, keeping u's model.
func (u *Usage) add(v Usage) {
	u.InputTokens = min(u.InputTokens+v.InputTokens, maxTokens)
	u.OutputTokens = min(u.OutputTokens+v.OutputTokens, maxTokens)
}
