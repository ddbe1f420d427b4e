package limits

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"karvi-edda-temporal/mapping/redact"
)

// Verdict is what a text or a transcript line says about a usage limit.
type Verdict struct {
	// Limited is true when the agent stopped on a usage limit.
	Limited bool
	// ResetAt is when the limit lifts, in UTC; zero when no reset could be
	// read, so the caller waits for its own configured time.
	ResetAt time.Time
	// Source names what recognised it: "sign:rate_limit_event",
	// "sign:api_error_status", "pattern:NAME" or "pattern:generic".
	Source string
	// Text is a short excerpt of the message, secrets masked.
	Text string
}

// Until is how long to wait from now for the limit to lift: until ResetAt,
// or fallback when the reset is unknown; never negative.
func (v Verdict) Until(now time.Time, fallback time.Duration) time.Duration {
	if v.ResetAt.IsZero() {
		return max(fallback, 0)
	}
	return max(v.ResetAt.Sub(now), 0)
}

// Sources that are not patterns.
const (
	SourceRateLimitEvent = "sign:rate_limit_event"
	SourceAPIErrorStatus = "sign:api_error_status"
	SourceGeneric        = "pattern:generic"
)

// Config extends and tunes a Detector. The zero value is the defaults.
type Config struct {
	// Patterns are tried before the built-in ones, in order.
	Patterns []Pattern `yaml:"patterns" json:"patterns"`
	// Zone is the IANA zone of times printed without one; UTC when empty.
	Zone string `yaml:"zone" json:"zone"`
}

// ParseConfig reads a Config from YAML (JSON is YAML too). Unknown fields are
// an error, and so is any bad pattern (see New).
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if strings.TrimSpace(string(data)) == "" {
			return Config{}, nil
		}
		return Config{}, fmt.Errorf("limit patterns: %w", err)
	}
	if _, err := New(c); err != nil {
		return Config{}, err
	}
	return c, nil
}

// PatternFlags collects patterns from a repeatable command-line flag, each
// written NAME=REGEXP or NAME,RESET=REGEXP (RESET one of auto, none, unix,
// after, time). It implements flag.Value: flag.Var(&pf, "limit-pattern", ...).
type PatternFlags []Pattern

// String lists the patterns as they were given.
func (f *PatternFlags) String() string {
	if f == nil {
		return ""
	}
	parts := make([]string, len(*f))
	for i, p := range *f {
		head := p.Name
		if p.Reset != "" && p.Reset != ResetAuto {
			head += "," + p.Reset
		}
		parts[i] = head + "=" + p.Match
	}
	return strings.Join(parts, " ")
}

// Set parses and checks one pattern.
func (f *PatternFlags) Set(s string) error {
	p, err := ParsePatternFlag(s)
	if err != nil {
		return err
	}
	*f = append(*f, p)
	return nil
}

// ParsePatternFlag reads NAME=REGEXP or NAME,RESET=REGEXP and checks it.
func ParsePatternFlag(s string) (Pattern, error) {
	head, match, ok := strings.Cut(s, "=")
	if !ok {
		return Pattern{}, fmt.Errorf("limit pattern %q: want NAME=REGEXP or NAME,RESET=REGEXP", s)
	}
	name, reset, _ := strings.Cut(head, ",")
	p := Pattern{Name: strings.TrimSpace(name), Match: match, Reset: strings.TrimSpace(reset)}
	if _, err := compile([]Pattern{p}, nil); err != nil {
		return Pattern{}, err
	}
	return p, nil
}

// Detector recognises usage limits. It is safe for concurrent use.
type Detector struct {
	patterns []compiled // the caller's, then the defaults
	zone     *time.Location
}

var std = &Detector{patterns: defaults, zone: time.UTC}

// Default returns the Detector with the built-in patterns, reading times
// printed without a zone as UTC.
func Default() *Detector { return std }

// New returns a Detector with the caller's patterns before the built-in
// ones. Every bad pattern is reported, each error naming its pattern: an
// invalid name or regexp, a name used twice or by a built-in pattern, a
// reset mode that needs a group the regexp lacks, a regexp that matches
// empty text or an ordinary failing check that mentions a rate limit.
func New(c Config) (*Detector, error) {
	taken := make(map[string]bool, len(defaults))
	for _, p := range defaults {
		taken[p.Name] = true
	}
	taken["generic"] = true
	user, err := compile(c.Patterns, taken)
	if err != nil {
		return nil, err
	}
	zone := time.UTC
	if c.Zone != "" {
		l, ok := loadZone(c.Zone)
		if !ok {
			return nil, fmt.Errorf("limit patterns: zone %q is not a known IANA zone name", c.Zone)
		}
		zone = l
	}
	return &Detector{patterns: append(user, defaults...), zone: zone}, nil
}

// Text judges free text: a conductor's error, the error in state.json, the
// tail of an agent's stderr. now is when the text was seen.
func (d *Detector) Text(s string, now time.Time) Verdict {
	return d.text(s, now, false)
}

// text runs the patterns, then the generic rule unless wholeOnly, in which
// case only patterns that are a whole message, matching at the start, count.
func (d *Detector) text(s string, now time.Time, wholeOnly bool) Verdict {
	if wholeOnly {
		s = strings.TrimSpace(s)
	}
	hint := hasHint(s)
	for i := range d.patterns {
		c := &d.patterns[i]
		if wholeOnly && !c.whole || c.builtin && !hint {
			continue
		}
		m := c.re.FindStringSubmatchIndex(s)
		if m == nil || wholeOnly && m[0] != 0 {
			continue
		}
		return Verdict{
			Limited: true,
			ResetAt: d.patternReset(c, s, m, now),
			Source:  "pattern:" + c.Name,
			Text:    excerpt(s, m[0]),
		}
	}
	if wholeOnly || !hint {
		return Verdict{}
	}
	return d.generic(s, now)
}

func (d *Detector) patternReset(c *compiled, s string, m []int, now time.Time) time.Time {
	var (
		t  time.Time
		ok bool
	)
	switch c.Reset {
	case ResetNone:
	case ResetUnix:
		t, ok = fromUnix(group(c.re, s, m, "reset"))
	case ResetAfter:
		t, ok = afterDur(group(c.re, s, m, "reset"), now)
	case ResetTime:
		t, ok = d.readTime(group(c.re, s, m, "reset"), group(c.re, s, m, "zone"), now)
	default: // auto
		t, ok = findReset(s[m[0]:lineEnd(s, m[0], 600)], now, d.zone)
	}
	if !ok {
		return time.Time{}
	}
	return t
}

var whenWhole = regexp.MustCompile(`(?i)^\s*` + whenExpr + `\s*[.,;]?\s*$`)

func (d *Detector) readTime(text, zone string, now time.Time) (time.Time, bool) {
	m := whenWhole.FindStringSubmatchIndex(text)
	if m == nil {
		return time.Time{}, false
	}
	g := groups(whenWhole, text, m)
	if g["zone"] == "" && g["zabbr"] == "" && zone != "" {
		g["zone"] = zone
	}
	return readWhen(g, now, d.zone)
}

func group(re *regexp.Regexp, s string, m []int, name string) string {
	i := re.SubexpIndex(name)
	if i < 0 || m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// generic applies the generic rule line by line.
func (d *Detector) generic(s string, now time.Time) Verdict {
	if checkOutput.MatchString(s) {
		return Verdict{}
	}
	for start := 0; start < len(s); {
		end := strings.IndexByte(s[start:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		line := s[start:end]
		if r := genericReset.FindStringIndex(line); r != nil {
			if l := limitStatement.FindStringIndex(line); l != nil && !testOutput.MatchString(line) {
				v := Verdict{Limited: true, Source: SourceGeneric, Text: excerpt(s, start+l[0])}
				if t, ok := findReset(line, now, d.zone); ok {
					v.ResetAt = t
				}
				return v
			}
		}
		start = end + 1
	}
	return Verdict{}
}

// lineEnd is the end of the line holding at, at most max bytes after it.
func lineEnd(s string, at, max int) int {
	end := len(s)
	if i := strings.IndexByte(s[at:], '\n'); i >= 0 {
		end = at + i
	}
	if end-at > max {
		end = at + max
		for end > at && !utf8.RuneStart(s[end]) {
			end--
		}
	}
	return end
}

// Bounds of an excerpt around a match.
const (
	excerptBefore = 80
	excerptAfter  = 240
)

// excerpt is the part of the line around at, secrets masked.
func excerpt(s string, at int) string {
	start := strings.LastIndexByte(s[:at], '\n') + 1
	if at-start > excerptBefore {
		start = at - excerptBefore
		for start < at && !utf8.RuneStart(s[start]) {
			start++
		}
	}
	end := lineEnd(s, at, excerptAfter)
	out := strings.TrimSpace(s[start:end])
	if !utf8.ValidString(out) {
		out = strings.ToValidUTF8(out, "\uFFFD")
	}
	return redact.String(out)
}

// lineShape is the part of a transcript line this package reads.
type lineShape struct {
	Type          string          `json:"type"`
	IsError       bool            `json:"is_error"`
	Status        json.RawMessage `json:"api_error_status"`
	Result        json.RawMessage `json:"result"`
	Message       json.RawMessage `json:"message"`
	Error         json.RawMessage `json:"error"`
	RateLimitInfo *struct {
		Status   string          `json:"status"`
		ResetsAt json.RawMessage `json:"resetsAt"`
		Type     string          `json:"rateLimitType"`
	} `json:"rate_limit_info"`
}

// Words one of which a line must hold to be worth decoding; other lines
// (assistant text, tool output) are never read.
var lineHints = [][]byte{[]byte(`rate_limit_event`), []byte(`"result"`), []byte(`"error"`), []byte(`turn.failed`)}

// Line judges one transcript line (Claude Code stream-json, `codex exec
// --json`). A line that is not a JSON object is read as free text. now is
// when the line was seen.
func (d *Detector) Line(line []byte, now time.Time) Verdict {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Verdict{}
	}
	if line[0] != '{' {
		return d.Text(string(line), now)
	}
	hinted := false
	for _, h := range lineHints {
		if bytes.Contains(line, h) {
			hinted = true
			break
		}
	}
	if !hinted {
		if !json.Valid(line) {
			return d.Text(string(line), now)
		}
		return Verdict{}
	}
	var l lineShape
	if err := json.Unmarshal(line, &l); err != nil {
		return d.Text(string(line), now)
	}
	switch l.Type {
	case "rate_limit_event":
		if l.RateLimitInfo == nil || l.RateLimitInfo.Status != "rejected" {
			return Verdict{}
		}
		v := Verdict{Limited: true, Source: SourceRateLimitEvent, Text: "rate_limit_event: rejected"}
		if w := l.RateLimitInfo.Type; w != "" {
			if len(w) > 40 {
				w = w[:40]
			}
			v.Text += " (" + redact.String(strings.ToValidUTF8(w, "\uFFFD")) + ")"
		}
		if n, ok := jsonInt(l.RateLimitInfo.ResetsAt); ok {
			if t, ok := unixTime(n); ok {
				v.ResetAt = t
			}
		}
		return v
	case "result":
		text := jsonString(l.Result)
		if l.IsError {
			if st, ok := jsonInt(l.Status); ok && st == 429 {
				v := d.text(text, now, false)
				if !v.Limited {
					v.Text = excerpt(text, 0)
					if v.Text == "" {
						v.Text = "api_error_status 429"
					}
					if t, ok := findReset(text, now, d.zone); ok {
						v.ResetAt = t
					}
				}
				v.Limited, v.Source = true, SourceAPIErrorStatus
				return v
			}
			return d.text(text, now, false)
		}
		return d.text(text, now, true)
	case "error":
		return d.text(jsonString(l.Message), now, false)
	case "turn.failed":
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(l.Error, &e) == nil && e.Message != "" {
			return d.text(e.Message, now, false)
		}
		return d.text(jsonString(l.Error), now, false)
	}
	return Verdict{}
}

func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// jsonInt reads a JSON number, or a string holding one.
func jsonInt(raw json.RawMessage) (int64, bool) {
	s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
	if s == "" || s == "null" {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != f || f < 0 || f > 1e15 {
		return 0, false
	}
	return int64(f), true
}
