package jobview

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"karvi-edda-temporal/mapping"
)

// Bounds that keep a tally small enough to travel through workflow history
// at every checkpoint, whatever the conductor writes.
const (
	// MaxOutputBytes bounds a test result's output and a try's error.
	MaxOutputBytes = 512
	maxLogLine     = 300
	maxLogs        = 20
	// maxTries is how many tries of a phase are kept in detail; counts,
	// time and cost cover every try.
	maxTries   = 32
	maxPhases  = 64
	maxModels  = 16
	maxResults = 200
)

// OtherModels names what every model past the first maxModels of an
// attempt used: a bound no real plan reaches.
const OtherModels = "other models"

// Phase try statuses.
const (
	TryRunning = "running"
	TryPassed  = "passed"
	TryFailed  = "failed"
)

// Tally is one attempt as its conductor events and state.json tell it,
// reduced. It is the reducer's whole state, JSON included, so a worker can
// hand it to the workflow at a checkpoint and take it up again in the next
// call; events at or before Applied are not counted twice.
type Tally struct {
	Applied    mapping.Position `json:"applied"`
	HasApplied bool             `json:"hasApplied,omitempty"`
	// Partial: the tally began after the start of the event log (a run
	// that took the job view up midway), so its counts miss the beginning.
	Partial bool `json:"partial,omitempty"`
	// PlanKnown: Phases carry the plan's checks.
	PlanKnown bool `json:"planKnown,omitempty"`
	// Attempt is the attempt's number, 0 when the tally did not learn it.
	Attempt int `json:"attempt,omitempty"`
	// Model is the dispatch's model ("" when it named none): the model of
	// every cost and token count the conductor does not attribute.
	Model string `json:"model,omitempty"`
	// Worktree is where the conductor works; Artifacts the attempt's run
	// files, set when it ended.
	Worktree  string   `json:"worktree,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
	// FirstTS and LastTS are the conductor's times of its first and last
	// event.
	FirstTS string `json:"firstTs,omitempty"`
	LastTS  string `json:"lastTs,omitempty"`
	// Current is the phase last started; Verifying says state.json showed
	// its checks running, and no event of it came since.
	Current   string       `json:"current,omitempty"`
	Verifying bool         `json:"verifying,omitempty"`
	Completed bool         `json:"completed,omitempty"`
	Phases    []PhaseTally `json:"phases,omitempty"`
	// Usage and Costs are per model, in order of appearance; model ""
	// stands for Model.
	Usage []mapping.Usage `json:"usage,omitempty"`
	Costs []ModelCost     `json:"costs,omitempty"`
	// PlanCostUSD is the plan's total as the conductor reports it
	// (state.json at a checkpoint, plan_completed at the end): more
	// than the phases' costs when failed tries cost something, which no
	// phase event reports.
	PlanCostUSD *float64 `json:"planCostUsd,omitempty"`
	// Logs are the latest failures and skips, one line each.
	Logs []string `json:"logs,omitempty"`
	// End is how the attempt ended, as the workflow decided; nil while it
	// runs.
	End *End `json:"end,omitempty"`
}

// PhaseTally is one phase of the attempt.
type PhaseTally struct {
	ID string `json:"id"`
	// Checks are the names of the plan's checks, in order; OnlyCmd is 1 +
	// the index of the phase's only cmd_succeeds check (0 for none), the
	// check a failure names when the conductor does not say which.
	Checks  []string `json:"checks,omitempty"`
	OnlyCmd int      `json:"onlyCmd,omitempty"`
	// TryCount counts every try; Tries keeps the latest maxTries.
	TryCount   int   `json:"tryCount,omitempty"`
	Tries      []Try `json:"tries,omitempty"`
	DurationMS int64 `json:"durationMs,omitempty"`
	// CostUSD is what the phase's events told, added up.
	CostUSD float64 `json:"costUsd,omitempty"`
	// SpentUSD is what the agents' transcripts say the phase spent over
	// all its tries, as the last ObserveSpend read them. It is kept apart
	// from CostUSD, and the phase costs the larger of the two: an agent's
	// transcript is written before its checks run and so before the
	// phase's event, which then tells a cost the transcripts already held.
	SpentUSD float64 `json:"spentUsd,omitempty"`
	// RestUSD is what the plan's total has beyond every phase's cost, put
	// on this phase by the last ObserveSpend (see there); recomputed at
	// each, never added to CostUSD, so an event that later tells a cost
	// the total already held does not count it twice.
	RestUSD    float64        `json:"restUsd,omitempty"`
	Tokens     *mapping.Usage `json:"tokens,omitempty"`
	Skipped    bool           `json:"skipped,omitempty"`
	SkipReason string         `json:"skipReason,omitempty"`
	// Ahead holds checks state.json showed for a try whose end the events
	// have not told yet.
	Ahead *CheckedTry `json:"ahead,omitempty"`
}

// Try is one run of a phase within the attempt (edda's phase attempt).
type Try struct {
	N          int    `json:"n"`
	Status     string `json:"status"`
	DurationMS int64  `json:"durationMs,omitempty"`
	Error      string `json:"error,omitempty"`
	// CheckFailed: the try failed because a check did (not a crash, a
	// timeout or the budget).
	CheckFailed bool `json:"checkFailed,omitempty"`
	// Checks are the try's check results from state.json, when a snapshot
	// caught them.
	Checks []StateCheck `json:"checks,omitempty"`
}

// CheckedTry is a try's check results as one state.json showed them.
type CheckedTry struct {
	Try    int          `json:"try"`
	Status string       `json:"status"`
	Checks []StateCheck `json:"checks"`
}

// ModelCost is what one model cost.
type ModelCost struct {
	Model string  `json:"model,omitempty"`
	USD   float64 `json:"usd"`
}

// End is how an attempt ended.
type End struct {
	// How is completed, blocked, aborted or redispatched.
	How string `json:"how"`
	// Phase and ErrorType are the outcome's; Error its lastError.
	Phase     string `json:"phase,omitempty"`
	ErrorType string `json:"errorType,omitempty"`
	Error     string `json:"error,omitempty"`
}

// How an attempt ended (the task workflow's words).
const (
	EndCompleted    = "completed"
	EndBlocked      = "blocked"
	EndAborted      = "aborted"
	EndRedispatched = "redispatched"
)

// Seed is what an attempt's tally starts from.
type Seed struct {
	// Plan is the attempt's plan; nil when it could not be read, and then
	// PhaseIDs give the phases (or, without them, the events do) and
	// checks have no names.
	Plan     *mapping.Plan
	PhaseIDs []string
	Attempt  int
	Model    string
	Worktree string
	// Partial: the tally starts after the beginning of the log.
	Partial bool
}

// NewTally is an attempt's tally before its first event.
func NewTally(s Seed) *Tally {
	t := &Tally{Attempt: s.Attempt, Model: s.Model, Worktree: s.Worktree, Partial: s.Partial}
	if s.Plan != nil {
		t.PlanKnown = true
		for _, ph := range s.Plan.Phases {
			p := t.phase(ph.ID)
			if p == nil {
				break
			}
			cmds := 0
			for i, c := range ph.Check {
				p.Checks = append(p.Checks, CheckName(c))
				if c.Type == mapping.CheckCmdSucceeds {
					cmds++
					p.OnlyCmd = i + 1
				}
			}
			if cmds != 1 {
				p.OnlyCmd = 0
			}
		}
		return t
	}
	for _, id := range s.PhaseIDs {
		if t.phase(id) == nil {
			break
		}
	}
	return t
}

// CheckName is how a check is named in test results: its type and what
// it looks at ("cmd_succeeds `cargo test`").
func CheckName(c mapping.Check) string {
	switch c.Type {
	case mapping.CheckCmdSucceeds:
		return clip(fmt.Sprintf("%s `%s`", c.Type, oneLine(c.Cmd)), maxLogLine)
	case mapping.CheckFileExists:
		return clip(c.Type+" "+c.Path, maxLogLine)
	case mapping.CheckFileContains:
		return clip(fmt.Sprintf("%s %s %q", c.Type, c.Path, c.Pattern), maxLogLine)
	case mapping.CheckEddaEvent:
		return clip(c.Type+" "+c.EventType, maxLogLine)
	case mapping.CheckWaitUntil:
		if c.Check != nil {
			return clip(c.Type+" "+CheckName(*c.Check), maxLogLine)
		}
	}
	return c.Type
}

// Clone is a deep copy, so a delivery can work on the checkpoint's tally
// while the caller keeps it.
func (t *Tally) Clone() *Tally {
	if t == nil {
		return nil
	}
	c := *t
	c.Artifacts = cloneSlice(t.Artifacts)
	c.Usage = cloneSlice(t.Usage)
	c.Costs = cloneSlice(t.Costs)
	c.Logs = cloneSlice(t.Logs)
	if t.End != nil {
		e := *t.End
		c.End = &e
	}
	if t.PlanCostUSD != nil {
		p := *t.PlanCostUSD
		c.PlanCostUSD = &p
	}
	c.Phases = make([]PhaseTally, len(t.Phases))
	for i, p := range t.Phases {
		p.Checks = cloneSlice(p.Checks)
		tries := make([]Try, len(p.Tries))
		for j, tr := range p.Tries {
			tr.Checks = cloneSlice(tr.Checks)
			tries[j] = tr
		}
		p.Tries = tries
		if p.Tokens != nil {
			u := *p.Tokens
			p.Tokens = &u
		}
		if p.Ahead != nil {
			a := *p.Ahead
			a.Checks = cloneSlice(a.Checks)
			p.Ahead = &a
		}
		c.Phases[i] = p
	}
	return &c
}

// WithEnd is a copy of t that ended as e; a nil t gives a tally that knows
// only its end (an attempt whose conductor never started, or one run
// before the job view existed).
func (t *Tally) WithEnd(e End) *Tally {
	c := t.Clone()
	if c == nil {
		c = &Tally{}
	}
	e.Error = clip(e.Error, MaxOutputBytes)
	c.End = &e
	return c
}

// Observe folds one event, with the token usage it carries, into the
// tally. It reports false, changing nothing, for an event
// at or before the last one folded in: a delivery taken up again from a
// checkpoint reads some lines twice.
func (t *Tally) Observe(ev mapping.Event) bool {
	if t.HasApplied && !t.Applied.Less(ev.Pos) {
		return false
	}
	t.Applied, t.HasApplied = ev.Pos, true
	if ev.TS != "" {
		if t.FirstTS == "" {
			t.FirstTS = ev.TS
		}
		t.LastTS = ev.TS
	}
	var ph *PhaseTally
	if ev.PhaseID != "" {
		ph = t.phase(ev.PhaseID)
	}
	if observe := tallyObservers[ev.Type]; observe != nil {
		observe(t, ev, ph)
	}
	u := ev.Usage
	model := ""
	if u != nil {
		model = u.Model
	}
	if ev.CostUSD != nil && *ev.CostUSD > 0 {
		c := *ev.CostUSD
		if ph != nil {
			ph.CostUSD += c
		}
		t.addCost(model, c)
	}
	if u != nil {
		t.addUsage(*u)
		if ph != nil {
			if ph.Tokens == nil {
				ph.Tokens = &mapping.Usage{Model: u.Model}
			} else if ph.Tokens.Model != u.Model {
				ph.Tokens.Model = "mixed"
			}
			addTokens(ph.Tokens, *u)
		}
	}
	return true
}

// tallyObservers says how the tally takes each of mapping.EventTypes
// beyond what every event gives it (its time, cost and tokens); nil: no
// more than that. ph is the event's phase, nil when it names none.
var tallyObservers = map[string]func(t *Tally, ev mapping.Event, ph *PhaseTally){
	mapping.EventPlanStart:     nil, // the plan's phases come from plan.yaml
	mapping.EventPhaseStart:    observePhaseStart,
	mapping.EventPhasePassed:   observePhaseEnd,
	mapping.EventPhaseFailed:   observePhaseEnd,
	mapping.EventPhaseSkipped:  observePhaseSkipped,
	mapping.EventPlanCompleted: observePlanCompleted,
	mapping.EventPlanAborted:   func(t *Tally, _ mapping.Event, _ *PhaseTally) { t.log("plan aborted") },
}

func observePhaseStart(t *Tally, ev mapping.Event, ph *PhaseTally) {
	t.Current, t.Verifying = ev.PhaseID, false
	if ph != nil {
		ph.start(ev.Attempt)
	}
}

func observePhaseEnd(t *Tally, ev mapping.Event, ph *PhaseTally) {
	if ev.PhaseID == t.Current {
		t.Verifying = false
	}
	if ph == nil {
		return
	}
	status := TryPassed
	if ev.Type == mapping.EventPhaseFailed {
		status = TryFailed
	}
	tr := ph.finish(ev.Attempt, status)
	d := max(ev.DurationMS, 0)
	tr.DurationMS = d
	ph.DurationMS = min(ph.DurationMS+d, math.MaxInt64/2)
	if status == TryFailed {
		tr.Error = clip(ev.Error, MaxOutputBytes)
		tr.CheckFailed = isCheckFailure(ev)
		t.log(fmt.Sprintf("%s try %d failed: %s", ph.ID, tr.N, oneLine(ev.Error)))
	}
	ph.adopt(tr)
}

func observePhaseSkipped(t *Tally, ev mapping.Event, ph *PhaseTally) {
	if ph != nil {
		ph.Skipped, ph.SkipReason = true, clip(ev.Reason, MaxOutputBytes)
	}
	t.log(strings.TrimSuffix(fmt.Sprintf("%s skipped: %s", ev.PhaseID, oneLine(ev.Reason)), ": "))
}

func observePlanCompleted(t *Tally, ev mapping.Event, _ *PhaseTally) {
	t.Completed = true
	if c := ev.TotalCostUSD; c != nil && *c >= 0 {
		t.raisePlanCost(*c)
	}
}

// ObserveState notes what a state.json snapshot says: the check results
// of each phase's last finished try, and whether the current phase's
// checks are running. A snapshot may be ahead of the events read so far;
// what it says of a try whose end is not yet known waits for that end.
func (t *Tally) ObserveState(s State) {
	t.Verifying = false
	if c := s.TotalCostUSD; c != nil && *c > 0 {
		t.raisePlanCost(*c)
	}
	for _, sp := range s.Phases {
		ph := t.existing(sp.ID)
		if ph == nil {
			continue
		}
		switch sp.Status {
		case "checking":
			if last := ph.last(); sp.ID == t.Current && last != nil && last.Status == TryRunning &&
				(sp.Attempts == 0 || sp.Attempts == last.N) {
				t.Verifying = true
			}
		case TryPassed, TryFailed:
			if len(sp.Checks) == 0 || sp.Attempts <= 0 {
				continue
			}
			c := CheckedTry{Try: sp.Attempts, Status: sp.Status, Checks: cloneSlice(sp.Checks)}
			if tr := ph.find(sp.Attempts); tr != nil && tr.Status != TryRunning {
				if tr.Status == c.Status {
					tr.Checks = c.Checks
				}
				continue
			}
			ph.Ahead = &c
		}
	}
}

// phase is the tally of phase id, added when new (nil past maxPhases).
func (t *Tally) phase(id string) *PhaseTally {
	if p := t.existing(id); p != nil {
		return p
	}
	if len(t.Phases) >= maxPhases || id == "" {
		return nil
	}
	t.Phases = append(t.Phases, PhaseTally{ID: clip(id, maxIDLen)})
	return &t.Phases[len(t.Phases)-1]
}

func (t *Tally) existing(id string) *PhaseTally {
	for i := range t.Phases {
		if t.Phases[i].ID == id {
			return &t.Phases[i]
		}
	}
	return nil
}

func (t *Tally) log(line string) {
	t.Logs = append(t.Logs, clip(line, maxLogLine))
	if len(t.Logs) > maxLogs {
		t.Logs = t.Logs[len(t.Logs)-maxLogs:]
	}
}

func (t *Tally) addCost(model string, usd float64) {
	for i := range t.Costs {
		if t.Costs[i].Model == model {
			t.Costs[i].USD += usd
			return
		}
	}
	if len(t.Costs) >= maxModels && model != OtherModels {
		t.addCost(OtherModels, usd)
		return
	}
	t.Costs = append(t.Costs, ModelCost{Model: model, USD: usd})
}

func (t *Tally) addUsage(u mapping.Usage) {
	for i := range t.Usage {
		if t.Usage[i].Model == u.Model {
			addTokens(&t.Usage[i], u)
			return
		}
	}
	if len(t.Usage) >= maxModels && u.Model != OtherModels {
		u.Model = OtherModels
		t.addUsage(u)
		return
	}
	t.Usage = append(t.Usage, u)
}

// start opens try n (the next one when the event gives no number).
func (p *PhaseTally) start(n int) {
	if n <= 0 {
		n = p.TryCount + 1
	}
	if last := p.last(); last != nil && last.N == n && last.Status == TryRunning {
		return // the same start again (a resumed conductor)
	}
	p.add(Try{N: n, Status: TryRunning})
}

// finish closes try n (the open one when the event gives no number), or
// records a try whose start was never seen.
func (p *PhaseTally) finish(n int, status string) *Try {
	last := p.last()
	if n <= 0 {
		if last != nil && last.Status == TryRunning {
			n = last.N
		} else {
			n = p.TryCount + 1
		}
	}
	if last != nil && last.N == n && last.Status == TryRunning {
		last.Status = status
		return last
	}
	p.add(Try{N: n, Status: status})
	return p.last()
}

func (p *PhaseTally) add(tr Try) {
	p.TryCount++
	p.Tries = append(p.Tries, tr)
	if len(p.Tries) > maxTries {
		p.Tries = p.Tries[len(p.Tries)-maxTries:]
	}
}

func (p *PhaseTally) last() *Try {
	if len(p.Tries) == 0 {
		return nil
	}
	return &p.Tries[len(p.Tries)-1]
}

func (p *PhaseTally) find(n int) *Try {
	for i := len(p.Tries) - 1; i >= 0; i-- {
		if p.Tries[i].N == n {
			return &p.Tries[i]
		}
	}
	return nil
}

// adopt gives a try that just ended the checks a snapshot showed ahead of
// its end.
func (p *PhaseTally) adopt(tr *Try) {
	a := p.Ahead
	if a == nil || a.Try > tr.N {
		return
	}
	if a.Try == tr.N && a.Status == tr.Status {
		tr.Checks = a.Checks
	}
	p.Ahead = nil
}

// isCheckFailure: the event says a check failed, in its error_type or, as
// earlier conductors wrote it, in its message's prefix.
func isCheckFailure(ev mapping.Event) bool {
	if t := mapping.NormalizeEventType(ev.ErrorType); t != "" {
		return t == mapping.ErrCheckFailed
	}
	msg := strings.ToLower(strings.TrimSpace(ev.Error))
	return strings.HasPrefix(msg, "check failed") || strings.HasPrefix(msg, "check_failed")
}

// span is the conductor's time from its first event to its last.
func (t *Tally) span() time.Duration {
	a, errA := time.Parse(time.RFC3339Nano, t.FirstTS)
	b, errB := time.Parse(time.RFC3339Nano, t.LastTS)
	if errA != nil || errB != nil || b.Before(a) {
		return 0
	}
	return b.Sub(a)
}

func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// ObserveLog folds a stored events.jsonl, every line at its byte offset
// (generation 0), with the token usage each line carries, and returns how
// many lines were not events. Folding the same log in pieces, checkpoint
// by checkpoint, gives the same tally. The caller redacts the log first if
// it may hold secrets.
func (t *Tally) ObserveLog(data []byte) (malformed int) {
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data) - off
		}
		line := data[off : off+end]
		pos := mapping.Position{Offset: int64(off)}
		off += end + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := mapping.ParseEvent(line)
		if err != nil {
			malformed++
			continue
		}
		ev.Pos = pos
		t.Observe(ev)
	}
	return malformed
}

// raisePlanCost records the conductor's total; spending never goes down.
func (t *Tally) raisePlanCost(total float64) {
	if t.PlanCostUSD == nil || total > *t.PlanCostUSD {
		t.PlanCostUSD = &total
	}
}

// ObserveSpend notes what the agents' transcripts say each phase spent
// over all its tries (phase events report only a passing try's), and puts
// what the plan's total has beyond the phases on the last phase whose
// last try failed or runs, else on the last one that was retried (a
// failed try's cost is in no event): the steps then add up to the job's
// cost.
func (t *Tally) ObserveSpend(byPhase map[string]float64) {
	var sum float64
	culprit, retried := -1, -1
	for i := range t.Phases {
		p := &t.Phases[i]
		p.RestUSD = 0
		if c, ok := byPhase[p.ID]; ok && c > p.SpentUSD {
			p.SpentUSD = c
		}
		sum += p.cost()
		if last := p.last(); last != nil && last.Status != TryPassed {
			culprit = i
		}
		if p.TryCount > 1 {
			retried = i
		}
	}
	if culprit < 0 {
		culprit = retried
	}
	if t.PlanCostUSD == nil || culprit < 0 {
		return
	}
	if rest := roundMicros(*t.PlanCostUSD - sum); rest > 0 {
		t.Phases[culprit].RestUSD = rest
	}
}

// cost is the phase's cost without the plan's rest: what its events told,
// or what its transcripts say when they say more (they count failed
// tries, and a try whose event is still to come). Never the two added, as
// they may tell the same try.
func (p *PhaseTally) cost() float64 {
	return max(p.CostUSD, p.SpentUSD)
}
