package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Event types, normalised to the real conductor's snake_case.
const (
	EventPlanStart     = "plan_start"
	EventPhaseStart    = "phase_start"
	EventPhasePassed   = "phase_passed"
	EventPhaseFailed   = "phase_failed"
	EventPhaseSkipped  = "phase_skipped"
	EventPlanCompleted = "plan_completed"
	EventPlanAborted   = "plan_aborted"
)

// EventTypes are the event types this runtime knows. Each projection of an
// event (the brief, the job tally, the outcome, the canonical stream) says
// in a table of its own how it takes every one of them, and a test of each
// fails while a type here has no entry there: adding a type is adding it
// here, then answering each of those tests. A type not listed is still
// read, and each projection takes it in its general way (a trace in the
// log, a message in the stream).
var EventTypes = []string{EventPlanStart, EventPhaseStart, EventPhasePassed, EventPhaseFailed,
	EventPhaseSkipped, EventPlanCompleted, EventPlanAborted}

// MissingEventTypes are the types of EventTypes (or of types, when given)
// for which handles is false: what a projection's table test reports.
func MissingEventTypes(handles func(typ string) bool, types ...string) []string {
	if len(types) == 0 {
		types = EventTypes
	}
	var out []string
	for _, t := range types {
		if !handles(t) {
			out = append(out, t)
		}
	}
	return out
}

// MaxTextBytes bounds each free-text field of an event (an error can carry a
// command's whole output); longer text is cut at a rune boundary and marked,
// which keeps workflow history and brief patches bounded.
const MaxTextBytes = 4096

const maxTypeLen = 128

// Position is where an event line starts: byte Offset in generation Gen of
// events.jsonl (Gen bumps when the file is truncated or replaced). seq is no
// key: the conductor restarts it at 0 on every resume.
type Position struct {
	Gen    int   `json:"gen"`
	Offset int64 `json:"offset"`
}

// Less orders positions by generation, then offset.
func (p Position) Less(q Position) bool {
	if p.Gen != q.Gen {
		return p.Gen < q.Gen
	}
	return p.Offset < q.Offset
}

// Event is one events.jsonl line. Fields a type does not carry stay zero.
type Event struct {
	Pos           Position `json:"pos"`
	Seq           int64    `json:"seq"`
	TS            string   `json:"ts,omitempty"`
	Type          string   `json:"type"`
	PlanName      string   `json:"plan_name,omitempty"`
	PhaseCount    int      `json:"phase_count,omitempty"`
	PhaseID       string   `json:"phase_id,omitempty"`
	Attempt       int      `json:"attempt,omitempty"`
	DurationMS    int64    `json:"duration_ms,omitempty"`
	CostUSD       *float64 `json:"cost_usd,omitempty"`
	Error         string   `json:"error,omitempty"`
	ErrorType     string   `json:"error_type,omitempty"`
	Reason        string   `json:"reason,omitempty"`
	PhasesPassed  int      `json:"phases_passed,omitempty"`
	PhasesPending int      `json:"phases_pending,omitempty"`
	TotalCostUSD  *float64 `json:"total_cost_usd,omitempty"`
	// Usage is the token count the line reports, nil when none.
	Usage *Usage `json:"usage,omitempty"`
}

// ParseEvent decodes one events.jsonl line in either casing (the document's
// PascalCase types or the conductor's snake_case). Unknown fields and types
// are kept quiet; a line that is not a JSON object, lacks a string "type",
// or holds a non-number where a number belongs is an error the caller
// counts. Integers written as floats (1.0) are accepted and truncated.
func ParseEvent(line []byte) (Event, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Event{}, errors.New("event: empty line")
	}
	if line[0] != '{' {
		return Event{}, errors.New("event: not a JSON object")
	}
	// Every event a worker sees goes through here, so the common line (valid
	// JSON, keys without escapes) is read without building a map; anything
	// else takes the general decoder, which also words the errors.
	var f rawFields
	if json.Valid(line) && f.scan(line) {
		return decodeEvent(&fieldParser{fields: &f})
	}
	return parseEventMap(line)
}

// parseEventMap is the general decoder of a trimmed line that starts with '{'.
func parseEventMap(line []byte) (Event, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return Event{}, fmt.Errorf("event: invalid JSON: %w", err)
	}
	return decodeEvent(&fieldParser{raw: raw})
}

func decodeEvent(p *fieldParser) (Event, error) {
	var ev Event
	typ, present := p.str("type")
	if p.err != nil {
		return Event{}, p.err
	}
	if !present {
		return Event{}, errors.New("event: type: missing")
	}
	ev.Type = NormalizeEventType(typ)
	if ev.Type == "" {
		return Event{}, fmt.Errorf("event: type: %q is not a usable event type", truncate(typ, 64))
	}
	if len(ev.Type) > maxTypeLen {
		return Event{}, fmt.Errorf("event: type: longer than %d bytes", maxTypeLen)
	}
	ev.Seq = p.int64("seq")
	ev.TS, _ = p.str("ts")
	ev.PlanName, _ = p.str("plan_name")
	ev.PhaseCount = p.int("phase_count")
	ev.PhaseID, _ = p.str("phase_id")
	ev.Attempt = p.int("attempt")
	ev.DurationMS = p.int64("duration_ms")
	ev.CostUSD = p.float("cost_usd")
	ev.Error, _ = p.str("error")
	ev.ErrorType, _ = p.str("error_type")
	ev.Reason, _ = p.str("reason")
	ev.PhasesPassed = p.int("phases_passed")
	ev.PhasesPending = p.int("phases_pending")
	ev.TotalCostUSD = p.float("total_cost_usd")
	ev.Usage = p.usage()
	if p.err != nil {
		return Event{}, p.err
	}
	ev.TS = truncate(ev.TS, 64)
	ev.MapText(func(s string) string { return truncate(s, MaxTextBytes) })
	return ev, nil
}

// eventKeys are the members ParseEvent reads; rawFields holds their values.
var eventKeys = [...]string{"type", "seq", "ts", "plan_name", "phase_count", "phase_id", "attempt",
	"duration_ms", "cost_usd", "error", "error_type", "reason", "phases_passed", "phases_pending", "total_cost_usd",
	// From firstUsageKey on, the members a token count is read from: the
	// counts at the top level, or an object under "usage" or "token_usage".
	"input_tokens", "output_tokens", "tokens_in", "tokens_out", "model", "usage", "token_usage"}

// rawFields is the raw value of each member in eventKeys, as a decode into
// map[string]json.RawMessage would give it (the last of duplicate keys).
type rawFields struct {
	vals [len(eventKeys)]json.RawMessage
	set  [len(eventKeys)]bool
}

// firstUsageKey is the index in eventKeys of the first usage member.
var firstUsageKey = slices.Index(eventKeys[:], "input_tokens")

// anySet reports whether any member from eventKeys[from] on is present.
func (f *rawFields) anySet(from int) bool {
	for _, set := range f.set[from:] {
		if set {
			return true
		}
	}
	return false
}

func (f *rawFields) get(key string) (json.RawMessage, bool) {
	for i, k := range eventKeys {
		if k == key {
			return f.vals[i], f.set[i]
		}
	}
	return nil, false
}

// scan records the members of line, which must be a valid JSON object. It
// reports false, leaving the line to the general decoder, for a key with
// escapes (only a real decode can compare it).
func (f *rawFields) scan(line []byte) bool {
	i := skipSpace(line, 1)
	if i < len(line) && line[i] == '}' {
		return true
	}
	for i < len(line) {
		if line[i] != '"' {
			return false
		}
		j := i + 1
		for j < len(line) && line[j] != '"' {
			if line[j] == '\\' {
				return false
			}
			j++
		}
		key := line[i+1 : j]
		i = skipSpace(line, j+1)
		if i >= len(line) || line[i] != ':' {
			return false
		}
		i = skipSpace(line, i+1)
		end := skipValue(line, i)
		for k, name := range eventKeys {
			if string(key) == name {
				f.vals[k], f.set[k] = line[i:end:end], true
				break
			}
		}
		i = skipSpace(line, end)
		if i >= len(line) {
			return false
		}
		if line[i] == '}' {
			return true
		}
		if line[i] != ',' {
			return false
		}
		i = skipSpace(line, i+1)
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at i in valid JSON.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			i++
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// fieldParser reads typed fields from a decoded object and keeps the first
// error, so ParseEvent reads as a list of fields.
type fieldParser struct {
	raw    map[string]json.RawMessage
	fields *rawFields // instead of raw, on the fast path
	err    error
}

func (p *fieldParser) get(key string) (json.RawMessage, bool) {
	if p.fields != nil {
		return p.fields.get(key)
	}
	v, ok := p.raw[key]
	return v, ok
}

func (p *fieldParser) fail(key, format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("event: %s: %s", key, fmt.Sprintf(format, args...))
	}
}

// str returns the string at key; absent and null are "" and not present.
func (p *fieldParser) str(key string) (string, bool) {
	v, ok := p.get(key)
	if !ok || isNull(v) {
		return "", false
	}
	if s, ok := plainString(v); ok {
		return s, true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		p.fail(key, "must be a string, got %s", jsonKind(bytes.TrimSpace(v)))
		return "", false
	}
	return s, true
}

func (p *fieldParser) number(key string) (float64, string, bool) {
	v, ok := p.get(key)
	if !ok || isNull(v) {
		return 0, "", false
	}
	v = bytes.TrimSpace(v)
	if kind := jsonKind(v); kind != "number" {
		p.fail(key, "must be a number, got %s", kind)
		return 0, "", false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		p.fail(key, "number %s out of range", truncate(string(v), 32))
		return 0, "", false
	}
	return f, string(v), true
}

func (p *fieldParser) int64(key string) int64 {
	if v, ok := p.get(key); ok {
		if n, ok := smallInt(v); ok {
			return n
		}
	}
	f, text, ok := p.number(key)
	if !ok {
		return 0
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n
	}
	// 2^63 as a float64 is exactly the first value that does not fit.
	if f >= 9.223372036854775807e18 || f < -9.223372036854775808e18 {
		p.fail(key, "number %s out of range", truncate(text, 32))
		return 0
	}
	return int64(f)
}

// smallInt reads an integer literal of at most 18 digits (every count and
// duration an event holds) without the float round trip; anything else is
// left to number.
func smallInt(v []byte) (int64, bool) {
	d := v
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if v[0] == '-' {
		n = -n
	}
	return n, true
}

func (p *fieldParser) int(key string) int {
	n := p.int64(key)
	if n > math.MaxInt32 || n < math.MinInt32 {
		p.fail(key, "number %d out of range", n)
		return 0
	}
	return int(n)
}

func (p *fieldParser) float(key string) *float64 {
	f, _, ok := p.number(key)
	if !ok {
		return nil
	}
	return &f
}

// plainString decodes a JSON string without escapes or invalid UTF-8, which
// is what nearly every field holds, without the general decoder.
func plainString(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') >= 0 || !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}

func isNull(v json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// NormalizeEventType maps any casing to snake_case: "PlanStart" and
// "plan_start" both give "plan_start", "GateEntered" gives "gate_entered",
// "phase-start" gives "phase_start". Characters other than letters, digits,
// '_', '-', '.', and spaces are dropped.
func NormalizeEventType(s string) string {
	if isSnakeCase(s) {
		return s
	}
	rs := []rune(strings.TrimSpace(s))
	var b strings.Builder
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == '.' || r == ' ':
			b.WriteByte('_')
		case unicode.IsUpper(r):
			if i > 0 {
				prev := rs[i-1]
				nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
				if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
					b.WriteByte('_')
				}
			}
			b.WriteRune(unicode.ToLower(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	parts := strings.FieldsFunc(b.String(), func(r rune) bool { return r == '_' })
	return strings.Join(parts, "_")
}

// isSnakeCase reports s already normalised: lowercase ASCII words of
// letters and digits joined by single underscores.
func isSnakeCase(s string) bool {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '_':
			if s[i-1] == '_' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// MapText applies f to every free-text field (Error, ErrorType, Reason,
// PlanName, PhaseID, the usage's Model) so the caller can redact before the
// event is recorded.
func (e *Event) MapText(f func(string) string) {
	e.Error = f(e.Error)
	e.ErrorType = f(e.ErrorType)
	e.Reason = f(e.Reason)
	e.PlanName = f(e.PlanName)
	e.PhaseID = f(e.PhaseID)
	if e.Usage != nil && e.Usage.Model != "" {
		u := *e.Usage
		u.Model = f(u.Model)
		e.Usage = &u
	}
}

// IsTerminal reports plan_completed and plan_aborted, the only events that
// end a run on their own.
func (e Event) IsTerminal() bool {
	return e.Type == EventPlanCompleted || e.Type == EventPlanAborted
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…(truncated)"
	cut := n - len(mark)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
