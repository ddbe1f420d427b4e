package soak

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config tunes the checks to the soak's time scale. The zero value means
// DefaultConfig's values.
type Config struct {
	// Grace is how long a conductor may stay alive after its attempt ended
	// (its workflow closed, paused it or moved to a later attempt) before
	// it counts as outliving it: the stop's own grace and the lag of the
	// sampled status. Scale it with the fence sweep's period.
	Grace time.Duration
	// Slack absorbs the difference between the workflows' clock and the
	// wall clock the samples and the journal are stamped with.
	Slack time.Duration
	// Stale is how old a task's sampled status may be and still be judged
	// by (a closed chain's never goes stale). The Sampler asks open tasks
	// in turn, so it must exceed a full round of them.
	Stale time.Duration
	// CostTolerance is how far two costs may differ and still agree (USD).
	CostTolerance float64
	// StopErrors are substrings (case-insensitive) of a blocked task's last
	// error that say its conductor was stopped or died: such an end needs a
	// fault, an abort or a redispatch in the journal to explain it.
	StopErrors []string
}

// DefaultConfig is the configuration at time scale 1 with the simulator's
// costs.
func DefaultConfig() Config {
	return Config{
		Grace:         15 * time.Second,
		Slack:         time.Second,
		Stale:         10 * time.Second,
		CostTolerance: 0.005,
		StopErrors: []string{
			"conductor shutdown", "agent crashed", "fence", "not a git repository",
			"conductor exited", "conductor stopped", "conductor was stopped", "conductor gone",
		},
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Grace <= 0 {
		c.Grace = d.Grace
	}
	if c.Slack <= 0 {
		c.Slack = d.Slack
	}
	if c.Stale <= 0 {
		c.Stale = d.Stale
	}
	if c.CostTolerance <= 0 {
		c.CostTolerance = d.CostTolerance
	}
	if c.StopErrors == nil {
		c.StopErrors = d.StopErrors
	}
	return c
}

// Check is one invariant's rule.
type Check func(o *Observed, c Config) []Violation

// LiveChecks judge the Sampler's timeline and the workers' fence lines:
// the driver may run them at any time during the soak.
func LiveChecks() []Check {
	return []Check{
		CheckConductorKeptWhileWanted, CheckOneConductorPerAttempt,
		CheckNoProcessOutlivesAttempt, CheckUsageLimitPauses, CheckBudgetPauses,
	}
}

// FinalChecks judge what the system left behind; run them once every task
// ended and everything was stopped.
func FinalChecks() []Check {
	return []Check{
		CheckStoppedTaskEnds, CheckSpendWithinBlockingBudget, CheckCostsAgree,
		CheckEndsOnceAndAgrees, CheckBriefLogMatchesEvents, CheckWebhookIDsUnique,
		CheckNothingLeftRunning,
	}
}

// CheckLive runs LiveChecks.
func CheckLive(o *Observed, c Config) []Violation { return run(o, c, LiveChecks()) }

// CheckFinal runs FinalChecks.
func CheckFinal(o *Observed, c Config) []Violation { return run(o, c, FinalChecks()) }

// CheckAll runs every check, violations sorted for a stable report.
func CheckAll(o *Observed, c Config) []Violation {
	return run(o, c, append(LiveChecks(), FinalChecks()...))
}

func run(o *Observed, c Config, checks []Check) []Violation {
	c = c.withDefaults()
	var out []Violation
	for _, ch := range checks {
		out = append(out, ch(o, c)...)
	}
	SortViolations(out)
	return out
}

// point is one task's status at one sample.
type point struct {
	At time.Time
	S  TaskSample
}

// timelines gives each task's statuses in time order.
func timelines(o *Observed) map[string][]point {
	out := map[string][]point{}
	for _, s := range o.Samples {
		for _, ts := range s.Tasks {
			out[ts.Task] = append(out[ts.Task], point{At: s.At, S: ts})
		}
	}
	for _, tl := range out {
		sort.SliceStable(tl, func(i, j int) bool { return tl[i].At.Before(tl[j].At) })
	}
	return out
}

// around returns the task's last point at or before t and its first point
// after t (nil when none).
func around(tl []point, t time.Time) (before, after *point) {
	i := sort.Search(len(tl), func(i int) bool { return tl[i].At.After(t) })
	if i > 0 {
		before = &tl[i-1]
	}
	if i < len(tl) {
		after = &tl[i]
	}
	return before, after
}

// fresh reports whether p may judge the task at t: a closed chain's
// status holds until the task is seen open again, an open one's only for
// Config.Stale.
func fresh(p *point, t time.Time, c Config) bool {
	return p != nil && (!p.S.Open || t.Sub(p.At) <= c.Stale)
}

// journalHas reports the first record of one of kinds about task (or
// about its run as a whole) within [from, to], nil when none.
func journalHas(o *Observed, task, run string, from, to time.Time, kinds ...RecordKind) *Record {
	for i := range o.Journal {
		r := &o.Journal[i]
		if !slices.Contains(kinds, r.Kind) {
			continue
		}
		if r.Task != task && (r.Task != "" || run == "" || r.Run != run) {
			continue
		}
		if r.At.Before(from) || r.At.After(to) {
			continue
		}
		return r
	}
	return nil
}

// taskRun is the run a task belongs to, from its observation or the
// journal.
func taskRun(o *Observed, task string) string {
	if t := o.Task(task); t != nil && t.Run != "" {
		return t.Run
	}
	for _, r := range o.Journal {
		if r.Task == task && r.Run != "" {
			return r.Run
		}
	}
	return ""
}

// farPast and farFuture bound a journal search by time when none applies.
var (
	farPast   = time.Time{}
	farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

func ts(t time.Time) string {
	if t.IsZero() {
		return "(unknown)"
	}
	return t.UTC().Format("15:04:05.000")
}

func usd(v float64) string { return "$" + strings.TrimRight(strings.TrimRight(fmtFloat(v), "0"), ".") }

func fmtFloat(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "NaN"
	}
	return strconvFormat(v)
}

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol+1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// terminal task statuses on karvi's board.
func terminalStatus(s string) bool {
	return s == "completed" || s == "blocked" || s == "cancelled"
}

func strconvFormat(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
