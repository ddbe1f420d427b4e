package jsonmerge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Merge returns dst with patch applied by karvi's rules: when both sides hold
// a JSON object under a key the two objects merge recursively; otherwise the
// patch value replaces the old one, whatever it is (array, scalar, or null,
// which is stored, not deleted).
//
// Neither argument is modified. The result shares no maps or slices with
// patch, but may share untouched subtrees with dst, so treat dst as frozen or
// Clone it first if it will be mutated later.
func Merge(dst, patch map[string]any) map[string]any {
	out := make(map[string]any, len(dst)+len(patch))
	for k, v := range dst {
		out[k] = v
	}
	for k, pv := range patch {
		pm, pIsObj := pv.(map[string]any)
		dm, dIsObj := out[k].(map[string]any)
		if pIsObj && dIsObj {
			out[k] = Merge(dm, pm)
			continue
		}
		out[k] = Clone(pv)
	}
	return out
}

// Clone deep-copies a value decoded from JSON (maps, slices and scalars).
func Clone(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = Clone(e)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = Clone(e)
		}
		return s
	default:
		return v
	}
}

// CloneObject is Clone for a whole document.
func CloneObject(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return Clone(m).(map[string]any)
}

// ErrNotObject says a body that must be a JSON object was something else.
var ErrNotObject = errors.New("body must be a JSON object")

// DecodeObject parses a PATCH or PUT body. An empty body counts as {} because
// karvi parses `body || '{}'`. Numbers decode as float64, as they do in
// karvi's JavaScript, so stored documents print the same numbers.
func DecodeObject(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode JSON body: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode JSON body: trailing data after the JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return nil, fmt.Errorf("%w, got null", ErrNotObject)
		}
		return nil, fmt.Errorf("%w, got %T", ErrNotObject, v)
	}
	return m, nil
}

// TimeFormat is JavaScript's Date.prototype.toISOString layout, which karvi
// uses for every timestamp it writes.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime renders t the way karvi's nowIso() does.
func FormatTime(t time.Time) string {
	return t.UTC().Format(TimeFormat)
}

// StampMeta applies karvi's writeBrief rules to doc in place: meta becomes an
// object if it is missing or falsy, meta.updatedAt is set to now,
// meta.boardType defaults to "brief" and meta.version to 1 when falsy, and
// meta.taskId is always the task being written.
//
// A truthy non-object meta (say the string "x") is replaced by an object;
// karvi would silently fail to set properties on it. Briefs written by this
// project never carry such a meta.
func StampMeta(doc map[string]any, taskID string, now time.Time) {
	meta, ok := doc["meta"].(map[string]any)
	if !ok {
		meta = map[string]any{}
	}
	meta["updatedAt"] = FormatTime(now)
	if jsFalsy(meta["boardType"]) {
		meta["boardType"] = "brief"
	}
	if jsFalsy(meta["version"]) {
		meta["version"] = float64(1)
	}
	meta["taskId"] = taskID
	doc["meta"] = meta
}

// jsFalsy reports whether JavaScript would treat a decoded JSON value as
// false in `x || default`.
func jsFalsy(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case bool:
		return !t
	case float64:
		return t == 0 || math.IsNaN(t)
	case json.Number:
		f, err := t.Float64()
		return err == nil && f == 0
	case string:
		return t == ""
	default:
		return false
	}
}
