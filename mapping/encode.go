package mapping

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// Patch bodies are built for every conductor event, and each one carries
// the brief's whole log, so their encoding is the reducer's hot path. The
// functions here append exactly the bytes encoding/json would produce for
// the value types bodies use (HTML-escaped strings, json's float format),
// without json.Marshal's re-validation of every nested MarshalJSON output,
// which made body encoding quadratic in nesting depth times log length.
// Anything else falls back to json.Marshal, so the output never differs.

// appendValue appends v's JSON encoding.
func appendValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendString(dst, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case float64:
		return appendFloat(dst, x)
	case bool:
		return strconv.AppendBool(dst, x), nil
	case obj:
		return x.appendTo(dst)
	case []string:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, s := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		return append(dst, ']'), nil
	case []LogEntry:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = e.appendTo(dst)
		}
		return append(dst, ']'), nil
	case LogEntry:
		return x.appendTo(dst), nil
	case encodedLog:
		return x.appendTo(dst), nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
}

func (o obj) appendTo(dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	for i, f := range o {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, f.k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendValue(dst, f.v); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendTo encodes the entry as json.Marshal does (field order and tags of
// LogEntry).
func (e LogEntry) appendTo(dst []byte) []byte {
	dst = append(dst, `{"time":`...)
	dst = appendString(dst, e.Time)
	dst = append(dst, `,"agent":`...)
	dst = appendString(dst, e.Agent)
	dst = append(dst, `,"action":`...)
	dst = appendString(dst, e.Action)
	dst = append(dst, `,"detail":`...)
	dst = appendString(dst, e.Detail)
	return append(dst, '}')
}

// appendFloat formats like encoding/json's float64 encoder: shortest
// representation, exponent form only outside [1e-6, 1e21), and an error for
// values JSON cannot hold.
func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// json writes e-07 as e-7.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

const hexDigits = "0123456789abcdef"

// htmlSafe marks the ASCII bytes json.Marshal writes as they are.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// appendString quotes s as json.Marshal does: <, > and & escaped for HTML,
// control characters as \uXXXX (or their short forms), invalid UTF-8 as
// \ufffd, and U+2028/U+2029 escaped for JavaScript.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
