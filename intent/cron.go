package intent

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cron is a cron expression in the grammar Temporal Schedules accept, so
// that what is checked here is what the server will run:
//
//   - 5 fields: minute hour day-of-month month day-of-week
//   - 6 fields: the same and year
//   - 7 fields: second minute hour day-of-month month day-of-week year
//   - @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly
//   - @every <interval>[/<offset>], e.g. @every 90s, @every 1d/2h
//
// A field is a comma list of `*`, `x`, `x-y`, each optionally `/step`
// (`x/step` runs from x to the field's maximum). Months take names
// (at least three letters), days of the week names (at least two), and 7 is
// Sunday as 0 is. Unlike some crons, day-of-month and day-of-week must both
// match, as in Temporal. Seconds default to 0, the year to any year from
// 2000 to 2100. The time zone is the intent's, never in the expression.
type Cron struct {
	expr string
	// every > 0 is an @every interval: the times offset + k*every since the
	// Unix epoch. The fields below are then unused.
	every, offset time.Duration

	second, minute, hour, dom, month, dow uint64
	// years holds bit y-minYear; all years when anyYear.
	years   [2]uint64
	anyYear bool
}

const (
	minYear = 2000
	maxYear = 2100
)

// cronField is one position of the expression.
type cronField struct {
	name     string
	min, max int
	names    []string // accepted names, index = value
	minName  int      // the shortest accepted prefix of a name
}

var (
	fSecond = cronField{name: "second", min: 0, max: 59}
	fMinute = cronField{name: "minute", min: 0, max: 59}
	fHour   = cronField{name: "hour", min: 0, max: 23}
	fDom    = cronField{name: "day-of-month", min: 1, max: 31}
	fMonth  = cronField{name: "month", min: 1, max: 12, minName: 3, names: []string{"",
		"january", "february", "march", "april", "may", "june", "july",
		"august", "september", "october", "november", "december"}}
	fDow = cronField{name: "day-of-week", min: 0, max: 7, minName: 2, names: []string{
		"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}}
	fYear = cronField{name: "year", min: minYear, max: maxYear}
)

var shorthands = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// maxCronLen bounds an expression; the longest sensible one is far shorter.
const maxCronLen = 512

// ParseCron parses expr. Its errors name the field at fault.
func ParseCron(expr string) (*Cron, error) {
	c := &Cron{expr: strings.TrimSpace(expr)}
	s := c.expr
	switch {
	case s == "":
		return nil, fmt.Errorf("empty expression")
	case len(s) > maxCronLen:
		return nil, fmt.Errorf("longer than %d characters", maxCronLen)
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		return nil, fmt.Errorf("%q: give the time zone as the intent's time zone, not in the expression", s)
	case strings.Contains(s, "#"):
		return nil, fmt.Errorf("%q: comments (#) are not accepted", s)
	}
	if rest, ok := strings.CutPrefix(s, "@every"); ok {
		return c, c.parseEvery(strings.TrimSpace(rest))
	}
	if strings.HasPrefix(s, "@") {
		long, ok := shorthands[s]
		if !ok {
			return nil, fmt.Errorf("%q: unknown shorthand (want @yearly, @monthly, @weekly, @daily, @hourly or @every)", s)
		}
		s = long
	}
	fields := strings.Fields(s)
	var sec, year string
	switch len(fields) {
	case 5:
		sec, year = "0", "*"
	case 6:
		sec, year = "0", fields[5]
	case 7:
		sec, year, fields = fields[0], fields[6], fields[1:6]
	default:
		return nil, fmt.Errorf("%q has %d fields, want 5 (minute hour day-of-month month day-of-week), 6 (and year) or 7 (second first, year last)", s, len(fields))
	}
	var err error
	set := func(dst *uint64, f cronField, text string) {
		if err == nil {
			*dst, err = parseField(f, text)
		}
	}
	set(&c.second, fSecond, sec)
	set(&c.minute, fMinute, fields[0])
	set(&c.hour, fHour, fields[1])
	set(&c.dom, fDom, fields[2])
	set(&c.month, fMonth, fields[3])
	set(&c.dow, fDow, fields[4])
	if err != nil {
		return nil, err
	}
	// 7 and 0 are both Sunday.
	if c.dow&(1<<7) != 0 {
		c.dow = c.dow&^(1<<7) | 1
	}
	if year == "*" {
		c.anyYear = true
	} else if err := c.parseYears(year); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cron) parseEvery(s string) error {
	if s == "" {
		return fmt.Errorf("@every: missing interval, e.g. @every 90s")
	}
	every, offset, hasOffset := strings.Cut(s, "/")
	var err error
	if c.every, err = parseInterval(every); err != nil {
		return fmt.Errorf("@every: interval: %v", err)
	}
	if c.every < time.Second {
		return fmt.Errorf("@every: interval %s is under a second", c.every)
	}
	// Fire times are kept to the second (Matches truncates to one), so
	// a fraction would name times that no check recognizes as the
	// intent's own.
	if c.every%time.Second != 0 {
		return fmt.Errorf("@every: interval %s is not a whole number of seconds", c.every)
	}
	if hasOffset {
		if c.offset, err = parseInterval(offset); err != nil {
			return fmt.Errorf("@every: offset: %v", err)
		}
		if c.offset%time.Second != 0 {
			return fmt.Errorf("@every: offset %s is not a whole number of seconds", c.offset)
		}
		if c.offset >= c.every {
			return fmt.Errorf("@every: offset %s must be shorter than the interval %s", c.offset, c.every)
		}
	}
	return nil
}

// parseInterval is a Go duration, or whole days as "Nd".
func parseInterval(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 36500 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration like 90s, 15m, 2h or 1d", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

// parseField turns one field into the set of its values.
func parseField(f cronField, text string) (uint64, error) {
	var set uint64
	err := eachValue(f, text, func(v int) { set |= 1 << v })
	return set, err
}

func (c *Cron) parseYears(text string) error {
	return eachValue(fYear, text, func(v int) {
		i := v - minYear
		c.years[i/64] |= 1 << (i % 64)
	})
}

// eachValue calls add for every value the field's text names.
func eachValue(f cronField, text string, add func(int)) error {
	for part := range strings.SplitSeq(text, ",") {
		if err := eachInPart(f, part, add); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

func eachInPart(f cronField, part string, add func(int)) error {
	if part == "" {
		return fmt.Errorf("empty item between commas")
	}
	base, stepText, hasStep := strings.Cut(part, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 || strings.Contains(stepText, "/") {
			return fmt.Errorf("%q: step must be a whole number of at least 1", part)
		}
		step = n
	}
	lo, hi := f.min, f.max
	if base != "*" {
		from, to, isRange := strings.Cut(base, "-")
		var err error
		if lo, err = f.value(from); err != nil {
			return err
		}
		hi = lo
		switch {
		case isRange:
			if hi, err = f.value(to); err != nil {
				return err
			}
			if hi < lo {
				return fmt.Errorf("%q: range ends before it starts", part)
			}
		case hasStep:
			hi = f.max // x/step runs to the end of the field
		}
	}
	for v := lo; v <= hi; v += step {
		add(v)
	}
	return nil
}

// value reads one number or name of the field.
func (f cronField) value(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing value")
	}
	if f.names != nil && len(s) >= f.minName && (s[0] < '0' || s[0] > '9') {
		low := strings.ToLower(s)
		for v, name := range f.names {
			if name != "" && strings.HasPrefix(name, low) {
				return v, nil
			}
		}
		return 0, fmt.Errorf("%q is not a %s name", s, f.name)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%d is out of range %d-%d", n, f.min, f.max)
	}
	return n, nil
}

// String is the expression as given.
func (c *Cron) String() string { return c.expr }

// Interval is the @every interval, zero for a calendar expression.
func (c *Cron) Interval() time.Duration { return c.every }

func (c *Cron) yearOK(y int) bool {
	if c.anyYear {
		return y >= minYear && y <= maxYear
	}
	i := y - minYear
	return i >= 0 && i <= maxYear-minYear && c.years[i/64]&(1<<(i%64)) != 0
}

func has(set uint64, v int) bool { return set&(1<<v) != 0 }

// Next is the first time after `after` that the expression names, read in
// loc; zero when there is none before the end of 2100. It walks the wall
// clock field by field as the server's calendar does, so that both name the
// same times, daylight-saving quirks included: a time a jump forward skips
// never comes; a time a jump back repeats comes once, at its later instant,
// unless the expression matches the hour before the repeat and the walk
// passes through it (then both copies come).
func (c *Cron) Next(after time.Time, loc *time.Location) time.Time {
	if c.every > 0 {
		return c.nextEvery(after)
	}
	w := after.In(loc)
	y, mo, d := w.Date()
	h, m, s := w.Clock()
	// shift is one hour while the walk is in the first copy of a repeated
	// hour: time.Date names the later copy, and the walk goes through the
	// hour before it instead.
	var shift time.Duration
	if w.Add(-time.Hour).Hour() == h {
		shift = time.Hour // after lies in the second copy
	}
	s++
walk:
	for {
		if s >= 60 {
			m, s = m+1, 0
		}
		if m >= 60 {
			prev := time.Date(y, mo, d, h, 0, 0, 0, loc)
			h, m = h+1, 0
			if next := time.Date(y, mo, d, h, 0, 0, 0, loc); shift == 0 && next.Sub(prev) > time.Hour {
				h, shift = h-1, time.Hour // the walk skipped the first copy of a repeated hour
			} else {
				shift = 0
			}
		}
		if h >= 24 {
			d, h = d+1, 0
		}
		if d > daysIn(mo, y) {
			mo, d = mo+1, 1
		}
		if mo > time.December {
			y, mo = y+1, time.January
		}
		switch {
		case y > maxYear:
			return time.Time{}
		case !c.yearOK(y):
			y, mo, d, h, m, s, shift = y+1, time.January, 1, 0, 0, 0, 0
			continue walk
		}
		for !has(c.month, int(mo)) {
			mo, d, h, m, s, shift = mo+1, 1, 0, 0, 0, 0
			if mo > time.December {
				continue walk
			}
		}
		for !has(c.dom, d) || !has(c.dow, int(time.Date(y, mo, d, h, m, s, 0, loc).Weekday())) {
			d, h, m, s, shift = d+1, 0, 0, 0, 0
			if d > daysIn(mo, y) {
				continue walk
			}
		}
		for !has(c.hour, h) {
			h, m, s, shift = h+1, 0, 0, 0
			if h >= 24 {
				continue walk
			}
		}
		for !has(c.minute, m) {
			if m, s = m+1, 0; m >= 60 {
				continue walk
			}
		}
		for !has(c.second, s) {
			if s++; s >= 60 {
				continue walk
			}
		}
		at := time.Date(y, mo, d, h, m, s, 0, loc)
		if at.Hour() != h {
			h, m, s = h+1, 0, 0 // a jump forward skipped this hour
			continue walk
		}
		return at.Add(shift)
	}
}

func daysIn(m time.Month, y int) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func (c *Cron) nextEvery(after time.Time) time.Time {
	since := after.Sub(time.Unix(0, 0).Add(c.offset))
	k := since / c.every
	if since < 0 {
		k--
	}
	next := time.Unix(0, 0).Add(c.offset + (k+1)*c.every)
	if next.Year() > maxYear {
		return time.Time{}
	}
	return next
}
