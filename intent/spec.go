package intent

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Spec is one schedule intent: what it fires, when, and when it stops.
// Build makes one from a Request; every field is then explicit (the time
// zone included), so the intent reads the same on any machine.
type Spec struct {
	Name   string `json:"name"`
	Target Target `json:"target"`
	// RunAt is a one-shot's time; Cron a recurring intent's expression.
	// Exactly one is set.
	RunAt    time.Time `json:"runAt,omitzero"`
	Cron     string    `json:"cron,omitempty"`
	TimeZone string    `json:"timeZone"`
	// MaxRuns stops the intent after this many runs of its target.
	MaxRuns int    `json:"maxRuns"`
	Owner   string `json:"owner"`
	// Until, when set, stops the intent once it holds after a run.
	Until *Condition `json:"until,omitempty"`
	// CatchUp bounds how many fires missed while nothing could fire are
	// run when firing is possible again; Overflow says what becomes of
	// the rest.
	CatchUp  int      `json:"catchUp"`
	Overflow Overflow `json:"overflow"`
	// MaxErrors consecutive failed fires open the circuit: the intent
	// stops in error until a person resumes it.
	MaxErrors int `json:"maxErrors"`
	// MinInterval is the shortest time between two fires, the delay of a
	// one-shot at the least, and the first backoff after a failed fire.
	MinInterval Duration `json:"minInterval"`
}

// Overflow is what happens to missed fires beyond the catch-up bound.
type Overflow string

// The overflow policies.
const (
	// OverflowSkip drops them.
	OverflowSkip Overflow = "skip"
	// OverflowDefer folds them into one more fire, one minimum interval
	// after the catch-up.
	OverflowDefer Overflow = "defer"
)

// Defaults and bounds.
const (
	DefaultMinInterval = time.Minute
	MinMinInterval     = time.Second
	MaxMinInterval     = 24 * time.Hour
	DefaultMaxRunsOnce = 1
	DefaultMaxRunsCron = 10_000
	MaxMaxRuns         = 1_000_000
	DefaultCatchUp     = 1
	MaxCatchUp         = 100
	DefaultMaxErrors   = 3
	MaxMaxErrors       = 100
	DefaultOwner       = "default"
	// MaxBackoff caps the wait after a failed fire.
	MaxBackoff = time.Hour
	// OnceCatchUpWindow is how late a one-shot may still fire after the
	// service was down at its time.
	OnceCatchUpWindow = 24 * time.Hour
	// maxCatchUpWindow caps a recurring intent's window.
	maxCatchUpWindow = 365 * 24 * time.Hour
	// serverMinCatchUpWindow is the shortest catch-up window the Temporal
	// server applies.
	serverMinCatchUpWindow = 10 * time.Second
)

var (
	namePattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	ownerPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)
)

// Request is an intent as a person writes it; Build reads it. Empty and
// zero fields take their defaults.
type Request struct {
	Name   string
	Target Target
	// RunAt: RFC 3339 ("2026-03-01T09:00:00+01:00"), a wall-clock time in
	// the intent's zone ("2026-03-01 09:00", seconds optional), or a delay
	// from now ("+90s", "+2h").
	RunAt       string
	Cron        string
	TimeZone    string
	MaxRuns     int
	Owner       string
	Until       string
	CatchUp     int
	Overflow    string
	MaxErrors   int
	MinInterval time.Duration
	// HostZone is the zone an intent without TimeZone gets: the caller's
	// host zone; UTC when empty.
	HostZone string
	// DefaultOwner is the owner an intent without Owner gets; "default"
	// when empty.
	DefaultOwner string
}

// RequestFor is the request that builds s again; an update starts from it.
func RequestFor(s Spec) Request {
	r := Request{Name: s.Name, Target: s.Target, Cron: s.Cron, TimeZone: s.TimeZone,
		MaxRuns: s.MaxRuns, Owner: s.Owner, CatchUp: s.CatchUp, Overflow: string(s.Overflow),
		MaxErrors: s.MaxErrors, MinInterval: s.MinInterval.D()}
	if !s.RunAt.IsZero() {
		r.RunAt = s.RunAt.Format(time.RFC3339)
	}
	if s.Until != nil {
		r.Until = s.Until.String()
	}
	return r
}

// FieldError is a problem with one field of an intent.
type FieldError struct {
	Field, Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Build applies the defaults, clamps a one-shot to at least the minimum
// interval from now, and validates. Every problem is reported, each naming
// its field.
func Build(r Request, now time.Time) (Spec, error) {
	s := Spec{Name: r.Name, Target: r.Target, Cron: strings.TrimSpace(r.Cron), TimeZone: r.TimeZone,
		MaxRuns: r.MaxRuns, Owner: r.Owner, CatchUp: r.CatchUp, Overflow: Overflow(r.Overflow),
		MaxErrors: r.MaxErrors, MinInterval: Duration(r.MinInterval)}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if s.TimeZone == "" {
		s.TimeZone = cmpOr(r.HostZone, "UTC")
	}
	if s.Owner == "" {
		s.Owner = cmpOr(r.DefaultOwner, DefaultOwner)
	}
	if s.MinInterval == 0 {
		s.MinInterval = Duration(DefaultMinInterval)
	}
	if s.CatchUp == 0 {
		s.CatchUp = DefaultCatchUp
	}
	if s.Overflow == "" {
		s.Overflow = OverflowSkip
	}
	if s.MaxErrors == 0 {
		s.MaxErrors = DefaultMaxErrors
	}
	until, err := ParseCondition(r.Until)
	if err != nil {
		bad("until", "%v", err)
	}
	s.Until = until

	// A one-shot's problems are reported here; validate must not report
	// its absence again.
	runAt, whenReported := strings.TrimSpace(r.RunAt), true
	switch {
	case runAt != "" && s.Cron != "":
		bad("run_at", "run_at and cron are mutually exclusive: give one")
	case runAt == "" && s.Cron == "":
		bad("run_at", "give run_at (one fire) or cron (recurring)")
	case runAt != "":
		loc, err := loadZone(s.TimeZone)
		if err != nil {
			break // time_zone reports it
		}
		at, err := ParseRunAt(runAt, now, loc)
		if err != nil {
			bad("run_at", "%v", err)
			break
		}
		s.RunAt = ClampRunAt(at, now, s.MinInterval.D())
	default:
		whenReported = false
	}
	if s.MaxRuns == 0 {
		s.MaxRuns = DefaultMaxRunsCron
		if s.Cron == "" {
			s.MaxRuns = DefaultMaxRunsOnce
		}
	}
	if err := s.validate(now, whenReported); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// Validate checks a spec, one decoded from a schedule's action included.
// It does not ask a one-shot to lie in the future: one that has fired is
// still a valid spec.
func (s Spec) Validate(now time.Time) error { return s.validate(now, false) }

func (s Spec) validate(now time.Time, whenReported bool) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if !namePattern.MatchString(s.Name) {
		if s.Name == "" {
			bad("name", "required")
		} else {
			bad("name", "%q must be 1-63 characters of a-z 0-9 _ -, starting with a letter or digit", s.Name)
		}
	}
	if s.Target.Kind == "" {
		bad("target", "required: a DispatchPlan or a run file")
	} else if err := s.Target.Validate(); err != nil {
		bad("target", "%v", err)
	}
	if !ownerPattern.MatchString(s.Owner) {
		bad("owner", "%q must be 1-64 characters of A-Z a-z 0-9 . _ @ -", s.Owner)
	}
	if s.MinInterval.D() < MinMinInterval || s.MinInterval.D() > MaxMinInterval {
		bad("min_interval", "%s must be between %s and %s", s.MinInterval.D(), MinMinInterval, MaxMinInterval)
	}
	if s.CatchUp < 1 || s.CatchUp > MaxCatchUp {
		bad("catch_up", "%d must be between 1 and %d", s.CatchUp, MaxCatchUp)
	}
	if s.Overflow != OverflowSkip && s.Overflow != OverflowDefer {
		bad("overflow", "%q must be skip or defer", s.Overflow)
	}
	if s.MaxErrors < 1 || s.MaxErrors > MaxMaxErrors {
		bad("max_errors", "%d must be between 1 and %d", s.MaxErrors, MaxMaxErrors)
	}
	if s.Until != nil {
		if err := s.Until.Validate(); err != nil {
			bad("until", "%v", err)
		}
	}
	loc, err := loadZone(s.TimeZone)
	if err != nil {
		bad("time_zone", "%v", err)
	}
	switch {
	case !s.RunAt.IsZero() && s.Cron != "":
		bad("run_at", "run_at and cron are mutually exclusive: give one")
	case s.RunAt.IsZero() && s.Cron == "":
		if !whenReported {
			bad("run_at", "give run_at (one fire) or cron (recurring)")
		}
	case !s.RunAt.IsZero():
		if s.MaxRuns != 1 {
			bad("max_runs", "%d: a run_at intent fires once; give cron to fire again", s.MaxRuns)
		}
	default:
		if s.MaxRuns < 1 || s.MaxRuns > MaxMaxRuns {
			bad("max_runs", "%d must be between 1 and %d", s.MaxRuns, MaxMaxRuns)
		}
		c, err := ParseCron(s.Cron)
		if err != nil {
			bad("cron", "%v", err)
			break
		}
		if loc == nil {
			break
		}
		times := Times{cron: c, loc: loc}
		gap, ok := times.MinGap(now)
		switch {
		case times.Next(now).IsZero():
			bad("cron", "%q never fires after %s", s.Cron, now.In(loc).Format(time.DateTime))
		case ok && gap < s.MinInterval.D():
			bad("cron", "%q fires %s apart at times, more often than min_interval %s", s.Cron, gap, s.MinInterval.D())
		}
	}
	return errors.Join(errs...)
}

// Times are the spec's fire times.
func (s Spec) Times() (Times, error) {
	loc, err := loadZone(s.TimeZone)
	if err != nil {
		return Times{}, &FieldError{Field: "time_zone", Problem: err.Error()}
	}
	if !s.RunAt.IsZero() {
		return Times{once: s.RunAt, loc: loc}, nil
	}
	c, err := ParseCron(s.Cron)
	if err != nil {
		return Times{}, &FieldError{Field: "cron", Problem: err.Error()}
	}
	return Times{cron: c, loc: loc}, nil
}

// When is the spec's timing as a person reads it: the cron and its zone,
// or the one-shot's time in the zone.
func (s Spec) When() string {
	if !s.RunAt.IsZero() {
		at := s.RunAt
		if loc, err := loadZone(s.TimeZone); err == nil {
			at = at.In(loc)
		}
		return "once at " + at.Format("2006-01-02 15:04:05 MST")
	}
	return "cron " + s.Cron
}

// CatchUpWindow is how late a missed fire may still be started when firing
// is possible again: for a recurring intent, the catch-up bound times the
// shortest gap between two of its fire times, so that at most that many
// missed fires lie inside it (never under the server's 10 s minimum; at
// most a year); for a one-shot, OnceCatchUpWindow.
func (s Spec) CatchUpWindow(now time.Time) time.Duration {
	times, err := s.Times()
	if err != nil || !s.RunAt.IsZero() {
		return OnceCatchUpWindow
	}
	gap, ok := times.MinGap(now)
	if !ok {
		return OnceCatchUpWindow
	}
	w := time.Duration(s.CatchUp) * gap
	if w/time.Duration(s.CatchUp) != gap || w > maxCatchUpWindow {
		w = maxCatchUpWindow
	}
	return max(w, serverMinCatchUpWindow)
}

// ParseRunAt reads a one-shot's time (see Request.RunAt).
func ParseRunAt(s string, now time.Time, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := parseInterval(rest)
		if err != nil {
			return time.Time{}, fmt.Errorf("delay %v", err)
		}
		return now.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-03-01T09:00:00+01:00), a time in the intent's zone (2026-03-01 09:00) or a delay (+10m)", s)
}

// ClampRunAt moves a one-shot that would fire sooner than minInterval from
// now to that point (to the next whole second), so that an intent can
// never fire the moment it is made, or in a storm of past times.
func ClampRunAt(at, now time.Time, minInterval time.Duration) time.Time {
	earliest := now.Add(minInterval)
	if at.Before(earliest) {
		at = earliest
	}
	if t := at.Truncate(time.Second); !t.Equal(at) {
		at = t.Add(time.Second)
	}
	return at.UTC()
}

func loadZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return nil, errors.New("required")
	case "Local":
		return nil, errors.New(`"Local" depends on the machine: name the zone, e.g. Europe/Paris or UTC`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (want an IANA name such as Europe/Paris, America/New_York or UTC)", name)
	}
	return loc, nil
}

// ValidZone reports whether name is a time zone an intent accepts.
func ValidZone(name string) bool {
	_, err := loadZone(name)
	return err == nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Duration is a time.Duration written as "1m30s" in JSON, so a spec in a
// workflow's input reads as it was given.
type Duration time.Duration

// D is d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads text ("1m30s") or nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		n, nerr := strconv.ParseInt(string(b), 10, 64)
		if nerr != nil {
			return fmt.Errorf("duration: want text like \"1m30s\": %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}
