package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Mask replaces every secret.
const Mask = "***REDACTED***"

// MaxDepth is how many levels of nested objects and arrays Value follows.
// The top-level object or array is level 1.
const MaxDepth = 10

// Redactor masks secrets like the package functions, except for the exact
// strings in its allow list (known false positives). The zero value and a
// nil *Redactor allow nothing.
type Redactor struct {
	allow map[string]struct{}
}

// New returns a Redactor that leaves the given strings unmasked wherever a
// rule would have masked exactly that text (a value after a sensitive key, a
// token, a long run). Empty strings are ignored.
func New(allow ...string) *Redactor {
	r := &Redactor{}
	for _, a := range allow {
		if a == "" {
			continue
		}
		if r.allow == nil {
			r.allow = make(map[string]struct{}, len(allow))
		}
		r.allow[a] = struct{}{}
	}
	return r
}

var std Redactor

// String masks the secrets in free text and returns it; text without secrets
// is returned as is, without allocating.
func String(s string) string { return std.String(s) }

// Value masks the secrets in a decoded JSON value (map[string]any, []any,
// string, json.Number, float64, bool, nil) and returns the result. Values
// under sensitive keys are masked whole; strings and keys go through String;
// containers deeper than MaxDepth are masked whole. The input is never
// modified: unchanged containers are shared, changed ones are copied.
func Value(v any) any { return std.Value(v) }

// JSON masks the secrets in one JSON document. A document with nothing to
// mask is returned unchanged, byte for byte; a changed one is re-encoded
// (keys sorted, no HTML escaping). Text that is not valid JSON is treated as
// free text (String).
func JSON(data []byte) []byte { return std.JSON(data) }

// String is the package String with r's allow list.
func (r *Redactor) String(s string) string {
	if len(s) < minTrigger {
		return s
	}
	var allow map[string]struct{}
	if r != nil {
		allow = r.allow
	}
	// One pass is usually final, but a mask can change what the next pass
	// sees (an unterminated quote that ran to a line end inside a masked
	// PEM block now runs further), and String must be idempotent. Each pass
	// that changes the text replaces original characters or merges masks,
	// so this ends; maxPasses only guards against a mistake in that reasoning.
	for pass := 0; pass < maxPasses; pass++ {
		sc := scanner{s: s, allow: allow}
		sc.scan()
		if len(sc.spans) == 0 {
			return s
		}
		next := sc.apply()
		if next == s {
			return s
		}
		s = next
	}
	return s
}

const maxPasses = 8

// Value is the package Value with r's allow list.
func (r *Redactor) Value(v any) any {
	out, _ := r.value(v, 0)
	return out
}

// value returns the redacted v and whether it differs from v; depth is the
// number of containers around v.
func (r *Redactor) value(v any, depth int) (any, bool) {
	switch x := v.(type) {
	case nil, bool, float64, float32, int, int64, int32, uint, uint64, uint32, json.Number:
		// Numbers are left alone on purpose: a count or a cost is not a
		// credential, and a number under a sensitive key is masked by the key.
		return v, false
	case string:
		out := r.String(x)
		if len(out) == len(x) && out == x {
			return v, false // v, not out: re-boxing the string would allocate
		}
		return out, true
	case map[string]any:
		if depth >= MaxDepth {
			return deepMask(len(x) == 0)
		}
		return r.object(x, depth+1)
	case []any:
		if depth >= MaxDepth {
			return deepMask(len(x) == 0)
		}
		var out []any
		for i, e := range x {
			ne, changed := r.value(e, depth+1)
			if changed && out == nil {
				out = slices.Clone(x)
			}
			if out != nil {
				out[i] = ne
			}
		}
		if out == nil {
			return x, false
		}
		return out, true
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = e
		}
		if out, changed := r.value(m, depth); changed {
			return out, true
		}
		return x, false
	case []string:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = e
		}
		if out, changed := r.value(a, depth); changed {
			return out, true
		}
		return x, false
	default:
		// Anything else (a struct, a pointer) cannot be walked without
		// reflection; its JSON form can. If it has none, it cannot be proven
		// safe and is masked.
		data, err := json.Marshal(x)
		if err != nil {
			return Mask, true
		}
		var g any
		if err := decode(data, &g); err != nil {
			return Mask, true
		}
		if out, changed := r.value(g, depth); changed {
			return out, true
		}
		return x, false
	}
}

// deepMask replaces a container below MaxDepth. Content that deep is not
// inspected, so it cannot be shown to be free of secrets, and no original is
// ever kept: it is masked whole. An empty container holds nothing and is
// kept.
func deepMask(empty bool) (any, bool) {
	if empty {
		return nil, false
	}
	return Mask, true
}

func (r *Redactor) object(x map[string]any, depth int) (any, bool) {
	var out map[string]any
	var renamed []string // original keys whose text held a secret
	for k, e := range x {
		var ne any
		changed := false
		if sensitiveKey(k) && !keepUnderSensitiveKey(e) && !r.allowed(e) {
			ne, changed = Mask, true
		} else {
			ne, changed = r.value(e, depth)
		}
		if r.String(k) != k {
			renamed = append(renamed, k)
			changed = true
		}
		if changed && out == nil {
			out = make(map[string]any, len(x))
			for k2, e2 := range x {
				out[k2] = e2
			}
		}
		if out != nil {
			out[k] = ne
		}
	}
	if out == nil {
		return x, false
	}
	// A key that is itself a secret is renamed; sorting first makes the
	// names the same on every run, and a suffix keeps two such keys apart.
	slices.Sort(renamed)
	for _, k := range renamed {
		e := out[k]
		delete(out, k)
		nk := r.String(k)
		for i := 2; ; i++ {
			if _, taken := out[nk]; !taken {
				break
			}
			nk = r.String(k) + "#" + strconv.Itoa(i)
		}
		out[nk] = e
	}
	return out, true
}

// keepUnderSensitiveKey: booleans, null and "" cannot carry a secret, and
// masking them would claim a secret was there ("password_set": true).
func keepUnderSensitiveKey(v any) bool {
	switch x := v.(type) {
	case nil, bool:
		return true
	case string:
		return x == ""
	}
	return false
}

// allowed reports whether a string value under a sensitive key is on the
// allow list.
func (r *Redactor) allowed(v any) bool {
	if r == nil || r.allow == nil {
		return false
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	default:
		return false
	}
	_, ok := r.allow[s]
	return ok
}

// JSON is the package JSON with r's allow list.
func (r *Redactor) JSON(data []byte) []byte {
	if r.quickClean(data) {
		return data
	}
	var v any
	if err := decode(data, &v); err != nil {
		out := r.String(string(data))
		if len(out) == len(data) && out == string(data) {
			return data
		}
		return []byte(out)
	}
	nv, changed := r.value(v, 0)
	if !changed {
		return data
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(nv); err != nil {
		// Cannot happen for decoded JSON; never return the original.
		return []byte(`"` + Mask + `"`)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// quickClean reports whether a JSON document certainly has nothing to mask,
// without decoding it; this is what keeps the per-event cost at one scan. It
// answers yes only when
//   - the raw text holds no backslash, so every string appears literally
//     between its quotes and decodes to exactly those bytes;
//   - nothing is nested deeper than MaxDepth and no key is sensitive;
//   - the free-text scan of the whole text finds nothing. That covers what
//     String would find in each string on its own: in valid JSON a string's
//     opening quote follows one of { [ , : or a space, so a key lookback
//     that crosses it finds no key, and a closing quote ends runs, tokens
//     and unquoted values exactly as the end of the string would. It is
//     also exactly what JSON does when the text turns out not to be JSON.
//
// An allow list breaks the second argument (an allowed span can be longer
// in the raw text than in the string), so with one each string is also
// scanned on its own.
func (r *Redactor) quickClean(data []byte) bool {
	if len(data) < minTrigger {
		return true
	}
	if bytes.IndexByte(data, '\\') >= 0 {
		return false
	}
	var allow map[string]struct{}
	if r != nil {
		allow = r.allow
	}
	text := string(data)
	depth := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '"':
			e := strings.IndexByte(text[i+1:], '"')
			if e < 0 {
				return false
			}
			str := text[i+1 : i+1+e]
			i += 1 + e
			if allow != nil && len(str) >= minTrigger {
				sc := scanner{s: str, allow: allow}
				if sc.scan(); len(sc.spans) > 0 {
					return false
				}
			}
			k := i + 1
			for k < len(text) && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r') {
				k++
			}
			if k < len(text) && text[k] == ':' && sensitiveKey(str) {
				return false
			}
		case '{', '[':
			if depth++; depth > MaxDepth {
				return false
			}
		case '}', ']':
			depth--
		}
	}
	sc := scanner{s: text, allow: allow}
	sc.scan()
	return len(sc.spans) == 0
}

// decode reads exactly one JSON value, keeping numbers as written.
func decode(data []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after JSON value")
	}
	return nil
}
