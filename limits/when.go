package limits

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zone names resolve on hosts without a zoneinfo database
)

// maxWait bounds a reset read from a message: anything further away than
// this is treated as unreadable (ResetAt zero) rather than trusted.
const maxWait = 400 * 24 * time.Hour

// whenExpr is a printed time with an optional date and zone. Its named groups
// are read by readWhen; every regexp that embeds it has them exactly once.
const whenExpr = `(?:` +
	`(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?(?:\s+(?P<year>\d{4}),?)?\s+(?:at\s+)?` +
	`|(?P<iso>\d{4}-\d{2}-\d{2})(?:t|\s+at\s+|\s+)` +
	`)?` +
	`(?P<hour>\d{1,2})(?::(?P<min>\d{2}))?(?::(?P<sec>\d{2}))?\s?(?P<ampm>[ap]\.?m\b\.?)?` +
	`(?:\s*\((?P<zone>[a-z][a-z0-9_+\-]*(?:/[a-z0-9_+\-]+)*)\)|\s*(?P<zabbr>utc|gmt|z)\b)?`

// durExpr is a wait: "6.379s", "17 seconds", "1m30s", "2 hours", "500ms", or a
// bare number of seconds. Longer unit names come first (leftmost-first).
const durExpr = `(?P<dur>\d+(?:\.\d+)?(?:\s*(?:milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)\b|(?:ms|s|m|h)(?:\d+(?:\.\d+)?(?:ms|s|m|h))+\b)?)`

// A reset phrase says when a limit lifts. They are searched in the text that
// follows a limit statement.
type resetPhrase struct {
	name string
	re   *regexp.Regexp
}

var resetPhrases = []resetPhrase{
	{"resets-in", regexp.MustCompile(`(?i)\bresets?\s+in\s+` + durExpr)},
	{"resets-at", regexp.MustCompile(`(?i)\bresets?\s+(?:at\s+|on\s+)?` + whenExpr)},
	{"try-again-at", regexp.MustCompile(`(?i)\b(?:try again|retry)\s+(?:at|after)\s+` + whenExpr)},
	{"regain-access-on", regexp.MustCompile(`(?i)\bregain access on\s+` + whenExpr)},
	{"try-again-in", regexp.MustCompile(`(?i)\b(?:try again|retry)\s+(?:in|after)\s+` + durExpr)},
	{"retry-after-header", regexp.MustCompile(`(?i)\bretry-after:\s*` + durExpr)},
	{"on-date", regexp.MustCompile(`(?i)\bon\s+` + whenExpr)},
}

var monthIndex = map[string]time.Month{
	"jan": time.January, "feb": time.February, "mar": time.March, "apr": time.April,
	"may": time.May, "jun": time.June, "jul": time.July, "aug": time.August,
	"sep": time.September, "oct": time.October, "nov": time.November, "dec": time.December,
}

// groups maps a regexp's named groups to their text in one match.
func groups(re *regexp.Regexp, s string, m []int) map[string]string {
	g := make(map[string]string, 8)
	for i, name := range re.SubexpNames() {
		if name == "" || m[2*i] < 0 {
			continue
		}
		g[name] = s[m[2*i]:m[2*i+1]]
	}
	return g
}

// findReset looks for the first reset phrase in s that yields a time. ok is
// false when no phrase could be read; the time is then unknown.
func findReset(s string, now time.Time, def *time.Location) (time.Time, bool) {
	best, bestAt := time.Time{}, -1
	for _, p := range resetPhrases {
		for _, m := range p.re.FindAllStringSubmatchIndex(s, 4) {
			if bestAt >= 0 && m[0] >= bestAt {
				break
			}
			g := groups(p.re, s, m)
			var t time.Time
			var ok bool
			if d, has := g["dur"]; has {
				t, ok = afterDur(d, now)
			} else {
				if p.name == "on-date" && g["mon"] == "" && g["iso"] == "" {
					continue // "on 3 files" is not a date
				}
				t, ok = readWhen(g, now, def)
			}
			if ok {
				best, bestAt = t, m[0]
				break
			}
		}
	}
	return best, bestAt >= 0
}

var durPart = regexp.MustCompile(`(\d+(?:\.\d+)?)\s*([a-z]*)`)

// parseDur reads a wait; a bare number is seconds.
func parseDur(s string) (time.Duration, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := durPart.FindAllStringSubmatch(s, 8)
	if len(parts) == 0 {
		return 0, false
	}
	var total float64
	for _, p := range parts {
		n, err := strconv.ParseFloat(p[1], 64)
		if err != nil {
			return 0, false
		}
		unit := time.Second
		switch {
		case p[2] == "" || p[2] == "s" || strings.HasPrefix(p[2], "sec"):
		case p[2] == "ms" || strings.HasPrefix(p[2], "milli"):
			unit = time.Millisecond
		case p[2] == "m" || strings.HasPrefix(p[2], "min"):
			unit = time.Minute
		case p[2] == "h" || strings.HasPrefix(p[2], "h"):
			unit = time.Hour
		case p[2] == "d" || strings.HasPrefix(p[2], "day"):
			unit = 24 * time.Hour
		default:
			return 0, false
		}
		total += n * float64(unit)
		if total > float64(maxWait) {
			return 0, false
		}
	}
	return time.Duration(total), true
}

func afterDur(s string, now time.Time) (time.Time, bool) {
	if now.IsZero() {
		return time.Time{}, false
	}
	d, ok := parseDur(s)
	if !ok {
		return time.Time{}, false
	}
	return now.Add(d).UTC(), true
}

// fromUnix reads Unix seconds (or milliseconds, for values that only make
// sense as such).
func fromUnix(s string) (time.Time, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return unixTime(n)
}

func unixTime(n int64) (time.Time, bool) {
	if n > 1e11 { // past year 5138 as seconds: it is milliseconds
		n /= 1000
	}
	if n <= 0 || n > 1e11 {
		return time.Time{}, false
	}
	return time.Unix(n, 0).UTC(), true
}

// loadZone resolves a printed zone name; UTC, GMT and Z are UTC.
func loadZone(name string) (*time.Location, bool) {
	switch strings.ToUpper(name) {
	case "UTC", "GMT", "Z", "ETC/UTC":
		return time.UTC, true
	}
	if strings.Contains(name, "..") {
		return nil, false
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		// The database's names are case sensitive; messages print them as
		// the database spells them, but try the usual capitalisation.
		loc, err = time.LoadLocation(titleZone(name))
		if err != nil {
			return nil, false
		}
	}
	return loc, true
}

// titleZone capitalises each word of a zone name: "europe/moscow" becomes
// "Europe/Moscow", "america/los_angeles" "America/Los_Angeles".
func titleZone(s string) string {
	b := []byte(strings.ToLower(s))
	up := true
	for i, c := range b {
		if up && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		up = c == '/' || c == '_' || c == '-'
	}
	return string(b)
}

// readWhen turns the groups of a whenExpr match into a time after now.
func readWhen(g map[string]string, now time.Time, def *time.Location) (time.Time, bool) {
	loc := def
	if z := g["zone"]; z != "" {
		l, ok := loadZone(z)
		if !ok {
			return time.Time{}, false
		}
		loc = l
	} else if g["zabbr"] != "" {
		loc = time.UTC
	}
	hour, err := strconv.Atoi(g["hour"])
	if err != nil {
		return time.Time{}, false
	}
	minute, sec := 0, 0
	if v := g["min"]; v != "" {
		minute, _ = strconv.Atoi(v)
	}
	if v := g["sec"]; v != "" {
		sec, _ = strconv.Atoi(v)
	}
	ampm := strings.ToLower(strings.ReplaceAll(g["ampm"], ".", ""))
	if ampm == "" && g["min"] == "" {
		return time.Time{}, false // a bare number is not a time of day
	}
	if ampm != "" {
		if hour < 1 || hour > 12 {
			return time.Time{}, false
		}
		hour %= 12
		if ampm == "pm" {
			hour += 12
		}
	}
	if hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	var (
		year       int
		month      time.Month
		day        int
		hasDate    bool
		hasYear    bool
		nowInZone  = now.In(loc)
		validShift = func(t time.Time, y int, m time.Month, d int) bool {
			return t.Year() == y && t.Month() == m && t.Day() == d
		}
	)
	switch {
	case g["iso"] != "":
		t, err := time.Parse("2006-01-02", g["iso"])
		if err != nil {
			return time.Time{}, false
		}
		year, month, day, hasDate, hasYear = t.Year(), t.Month(), t.Day(), true, true
	case g["mon"] != "":
		month = monthIndex[strings.ToLower(g["mon"][:3])]
		day, _ = strconv.Atoi(g["day"])
		hasDate = true
		if y := g["year"]; y != "" {
			year, _ = strconv.Atoi(y)
			hasYear = true
		}
	}
	if !hasYear && now.IsZero() {
		return time.Time{}, false // "the next such time" needs a now
	}
	var t time.Time
	switch {
	case hasYear:
		t = time.Date(year, month, day, hour, minute, sec, 0, loc)
		if !validShift(t, year, month, day) {
			return time.Time{}, false
		}
	case hasDate:
		year = nowInZone.Year()
		for range 2 {
			t = time.Date(year, month, day, hour, minute, sec, 0, loc)
			if validShift(t, year, month, day) && t.After(now) {
				break
			}
			year++ // Feb 29 may need a leap year; a past date is next year's
		}
		if !validShift(t, year, month, day) || !t.After(now) {
			return time.Time{}, false
		}
	default:
		y, m, d := nowInZone.Date()
		t = time.Date(y, m, d, hour, minute, sec, 0, loc)
		if !t.After(now) {
			t = time.Date(y, m, d+1, hour, minute, sec, 0, loc)
		}
	}
	if !now.IsZero() && t.Sub(now) > maxWait {
		return time.Time{}, false
	}
	return t.UTC(), true
}
