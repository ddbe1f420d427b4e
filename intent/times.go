package intent

import "time"

// Times are the instants an intent fires at: a cron read in a time zone,
// or one instant.
type Times struct {
	cron *Cron
	once time.Time
	loc  *time.Location
}

// gapScan bounds MinGap: this many fire times, or gapHorizon, whichever
// comes first.
const (
	gapScan    = 1000
	gapHorizon = 2 * 366 * 24 * time.Hour
)

// Location is the zone the times are read in.
func (t Times) Location() *time.Location { return t.loc }

// Next is the first fire time after `after`; zero when there is none.
func (t Times) Next(after time.Time) time.Time {
	if t.cron == nil {
		if t.once.After(after) {
			return t.once
		}
		return time.Time{}
	}
	return t.cron.Next(after, t.loc)
}

// Count counts the fire times in (after, until], stopping at limit.
func (t Times) Count(after, until time.Time, limit int) int {
	n := 0
	for at := t.Next(after); n < limit && !at.IsZero() && !at.After(until); at = t.Next(at) {
		n++
	}
	return n
}

// Matches reports whether at, to the second, is one of the fire times: a
// schedule's own fires do, a person's trigger usually does not.
func (t Times) Matches(at time.Time) bool {
	at = at.Truncate(time.Second)
	return t.Next(at.Add(-time.Second)).Equal(at)
}

// MinGap is the shortest time between two consecutive fire times from
// `from` on, over the next gapScan times or gapHorizon; ok is false when
// fewer than two times come in that span. An @every interval is its own
// gap.
func (t Times) MinGap(from time.Time) (gap time.Duration, ok bool) {
	if t.cron != nil && t.cron.every > 0 {
		return t.cron.every, true
	}
	prev := t.Next(from)
	end := from.Add(gapHorizon)
	for i := 0; i < gapScan && !prev.IsZero() && prev.Before(end); i++ {
		next := t.Next(prev)
		if next.IsZero() {
			break
		}
		if d := next.Sub(prev); !ok || d < gap {
			gap, ok = d, true
		}
		prev = next
	}
	return gap, ok
}
