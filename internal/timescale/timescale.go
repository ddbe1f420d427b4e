package timescale

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Env is the environment variable the worker, the starter and the karvi
// fake read the scale from.
const Env = "KARVI_EDDA_TIME_SCALE"

// Scale is how many times faster than real time the runtime's periods run:
// at 60 a minute lasts a second. 1, and the zero value, leave every period
// as it is.
type Scale float64

// One is production time.
const One Scale = 1

// minPeriod is the shortest period a scale makes of a positive one: a
// timer or ticker of zero or less would fire at once, or panic.
const minPeriod = time.Millisecond

// Parse reads a scale as Env and -time-scale write it: a number of at
// least 1 ("60" makes a minute last a second); "" is 1.
func Parse(v string) (Scale, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return One, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("time scale %q: want a number of at least 1, such as 60 for a minute that lasts a second", v)
	}
	if f < 1 {
		return 0, fmt.Errorf("time scale %q: want at least 1 (a scale only speeds time up; 1 is real time)", v)
	}
	return Scale(f), nil
}

// Of is d at this scale: d divided by the scale, never below a millisecond
// for a positive d. d itself at scale 1 or below (the zero value included).
func (s Scale) Of(d time.Duration) time.Duration {
	if s <= 1 || d <= 0 {
		return d
	}
	return max(time.Duration(float64(d)/float64(s)), minPeriod)
}

// Scaled reports whether the scale changes any period: false at 1 and
// for the zero value. A workflow input carries the scale only when it is
// set, so production inputs stay as they were.
func (s Scale) Scaled() bool { return s > 1 }

// String writes the scale as Parse reads it.
func (s Scale) String() string {
	if !s.Scaled() {
		return "1"
	}
	return strconv.FormatFloat(float64(s), 'g', -1, 64)
}

// Set and Get make a *Scale a flag.Value (and a flag.Getter).
func (s *Scale) Set(v string) error {
	n, err := Parse(v)
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// Get is the scale itself.
func (s *Scale) Get() any { return *s }
