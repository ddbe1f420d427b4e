package soak

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Phases are the phases of the built-in plan template every soak task
// runs (mapping.DefaultTemplate), in the order the conductor runs them:
// topological, ties broken by id.
var Phases = []string{"implement", "docs", "test"}

// StepKind is what one step of the mix does.
type StepKind string

// The kinds of steps. Each is something a person, karvi or the machine
// does to the runtime; the driver (cmd/soak) carries it out and journals
// it.
const (
	// StepStartTask starts a standalone task's workflow (Spec).
	StepStartTask StepKind = "start_task"
	// StepStartRun starts a run of dependent tasks (RunSpec).
	StepStartRun StepKind = "start_run"
	// StepBoardTask puts a task on karvi's board for the intake (Spec).
	StepBoardTask StepKind = "board_task"
	// StepAbort and StepRedispatch signal a running task.
	StepAbort      StepKind = "abort"
	StepRedispatch StepKind = "redispatch"
	// StepResume is a person ending a task's pause (`starter resume`).
	StepResume StepKind = "resume"
	// StepBudgetRaise sets a task's budget to BudgetUSD (`starter budget
	// set`); StepRunBudgetRaise a run's.
	StepBudgetRaise    StepKind = "budget_raise"
	StepRunBudgetRaise StepKind = "run_budget_raise"
	// StepAccountResume ends an account's pause (`starter account resume`).
	StepAccountResume StepKind = "account_resume"
	// StepPoolLimit sets a slot pool's max_concurrent to Count.
	StepPoolLimit StepKind = "pool_limit"
	// StepBoardCancel cancels a board task as a person would; StepBoardSendBack
	// sends a completed one back (completed -> needs_revision).
	StepBoardCancel   StepKind = "board_cancel"
	StepBoardSendBack StepKind = "board_send_back"
	// StepBoardReuse puts a new task on the board under the id of a
	// standalone task that ended (a board restored with reused ids): the
	// intake must run it, not take the old workflow's end for its own.
	StepBoardReuse StepKind = "board_reuse"
	// StepKillWorker SIGKILLs the worker of Host; StepRestartWorker starts
	// it again on the same work root.
	StepKillWorker    StepKind = "kill_worker"
	StepRestartWorker StepKind = "restart_worker"
	// StepKarvi429 answers karvi's next Count writes with 429;
	// StepKarviConflict arms Count version conflicts; StepKarviRestart
	// takes karvi down for Down and brings it back with its board.
	StepKarvi429      StepKind = "karvi_429"
	StepKarviConflict StepKind = "karvi_conflict"
	StepKarviRestart  StepKind = "karvi_restart"
	// StepServerRestart restarts the Temporal server on its database.
	StepServerRestart StepKind = "server_restart"
)

// Step is one thing that happens At after the soak's start.
type Step struct {
	At   time.Duration `json:"at"`
	Kind StepKind      `json:"kind"`
	// Task is the karvi task id the step is about, Run a run's slug.
	Task string `json:"task,omitempty"`
	Run  string `json:"run,omitempty"`
	// Host is the worker host of a kill or restart.
	Host string `json:"host,omitempty"`
	// Account of an account resume; Pool of a pool limit.
	Account string `json:"account,omitempty"`
	Pool    string `json:"pool,omitempty"`
	// Spec is the task a start or board step adds; RunSpec the run.
	Spec    *TaskSpec `json:"spec,omitempty"`
	RunSpec *RunSpec  `json:"runSpec,omitempty"`
	// BudgetUSD is a raise's new limit.
	BudgetUSD float64 `json:"budgetUsd,omitempty"`
	// Count is how many refusals a karvi fault arms, or a pool's limit.
	Count int `json:"count,omitempty"`
	// Down is how long a restarted service stays down.
	Down time.Duration `json:"down,omitempty"`
}

// TaskSpec is one task as the mix wants it to behave: what its phases do
// (the simulator's directives), its account, pool, budget and stall rule.
type TaskSpec struct {
	ID     string      `json:"id"`
	Phases []PhaseSpec `json:"phases"`
	// Account is the agent account (TaskInput.Account); empty: the pool's
	// when Pool is set, else the worker's default account, which every
	// such task shares.
	Account string `json:"account,omitempty"`
	// Pool is the agent slot pool the task waits in, empty for none.
	Pool   string  `json:"pool,omitempty"`
	Budget *Budget `json:"budget,omitempty"`
	// StallAfterSec and OnStall go to the dispatch (0: no stall rule).
	StallAfterSec int    `json:"stallAfterSec,omitempty"`
	OnStall       string `json:"onStall,omitempty"`
}

// PhaseSpec is what one phase's agent does, in wall time.
type PhaseSpec struct {
	ID    string        `json:"id"`
	Delay time.Duration `json:"delay"`
	Cost  float64       `json:"cost"`
	// Fail fails the checks of the phase's first Fail attempts (the
	// conductor retries it).
	Fail int `json:"fail,omitempty"`
	// Limit, when set, makes the agent meet its account's usage limit in
	// this phase, lasting Limit from the first hit.
	Limit time.Duration `json:"limit,omitempty"`
	// Stall keeps the agent silent this long before it works.
	Stall time.Duration `json:"stall,omitempty"`
	// Die makes the conductor crash (exit 3) at the phase's first attempt:
	// a fault of the mix, so a task blocked by it is no violation.
	Die bool `json:"die,omitempty"`
}

// RunSpec is a run of dependent tasks.
type RunSpec struct {
	Slug        string    `json:"slug"`
	Tasks       []RunTask `json:"tasks"`
	Concurrency int       `json:"concurrency"`
	Pool        string    `json:"pool,omitempty"`
	Budget      *Budget   `json:"budget,omitempty"`
}

// RunTask is one task of a run and the tasks it waits for.
type RunTask struct {
	Spec    TaskSpec `json:"spec"`
	Depends []string `json:"depends,omitempty"`
}

// Directives are the simulator directives that make the task behave as
// specified, for its dispatch message (the plan's purpose): checks pass
// unless a phase says otherwise, one `[sim phase=ID ...]` group a phase.
func (t TaskSpec) Directives() string {
	var b strings.Builder
	b.WriteString("[sim checks=pass]")
	for _, p := range t.Phases {
		fmt.Fprintf(&b, " [sim phase=%s delay=%s cost=%.2f", p.ID, p.Delay, p.Cost)
		if p.Fail > 0 {
			fmt.Fprintf(&b, " fail=%d", p.Fail)
		}
		if p.Limit > 0 {
			fmt.Fprintf(&b, " limit resets=%s", p.Limit)
		}
		if p.Stall > 0 {
			fmt.Fprintf(&b, " stall=%s", p.Stall)
		}
		if p.Die {
			b.WriteString(" die=1")
		}
		b.WriteString("]")
	}
	return b.String()
}

// Work is how long the task's agents work when nothing pauses or stops
// them: every attempt's delay and stall, in phase order.
func (t TaskSpec) Work() time.Duration {
	var d time.Duration
	for _, p := range t.Phases {
		d += time.Duration(1+p.Fail)*p.Delay + p.Stall
	}
	return d
}

// Cost is what the task's agents spend when every phase runs to its end.
func (t TaskSpec) Cost() float64 {
	var c float64
	for _, p := range t.Phases {
		c += float64(1+p.Fail) * p.Cost
	}
	return c
}

// Limited reports whether a phase of the task meets a usage limit.
func (t TaskSpec) Limited() bool {
	return slices.ContainsFunc(t.Phases, func(p PhaseSpec) bool { return p.Limit > 0 })
}

// Dies reports whether the task's conductor is made to crash.
func (t TaskSpec) Dies() bool {
	return slices.ContainsFunc(t.Phases, func(p PhaseSpec) bool { return p.Die })
}

// Mix is a soak's whole schedule, generated up front from its seed.
type Mix struct {
	Seed     int64         `json:"seed"`
	Duration time.Duration `json:"duration"`
	Scale    float64       `json:"scale"`
	Steps    []Step        `json:"steps"`
}

// Hosts are the worker hosts of a soak: the first is the one killed and
// restarted, the second runs throughout.
var Hosts = []string{"h1", "h2"}

// blockPhase is the shortest phase of a task with a blocking budget.
const blockPhase = 6 * time.Second

// Pool is the agent slot pool some tasks and runs wait in.
const Pool = "soak-pool"

// Shared accounts tasks name; the worker's default account is shared too.
var sharedAccounts = []string{"team-a", "team-b"}

// gen is the state of one mix's generation.
type gen struct {
	r     *rand.Rand
	d     time.Duration
	scale float64
	steps []Step
	seq   int
}

// scaled is a production period d at the soak's scale, in wall time.
func (g *gen) scaled(d time.Duration) time.Duration {
	if g.scale <= 1 {
		return d
	}
	return time.Duration(float64(d) / g.scale)
}

// between is a uniform duration in [lo, hi), to the millisecond.
func (g *gen) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return (lo + time.Duration(g.r.Int64N(int64(hi-lo)))).Round(time.Millisecond)
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) add(s Step) {
	if s.At < 0 {
		s.At = 0
	}
	if s.At > g.d {
		s.At = g.d
	}
	g.steps = append(g.steps, s)
}

// NewMix generates the mix of a soak that lasts d at scale (a minute of
// the runtime's periods lasts a minute divided by scale; below 1 is 1).
// The same arguments give the same mix. Every step falls within d; tasks
// arrive in its first 70 %, so that what they started can end by d.
func NewMix(seed int64, d time.Duration, scale float64) Mix {
	if scale < 1 || math.IsNaN(scale) {
		scale = 1
	}
	if d < time.Minute {
		d = time.Minute
	}
	g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 0x50a1c0de)), d: d, scale: scale}
	minutes := d.Minutes()
	arrive := time.Duration(float64(d) * 0.7)

	nTasks := max(4, int(math.Round(minutes*6)))
	for range nTasks {
		at := g.between(d/50, arrive)
		g.task(at)
	}
	nRuns := max(1, int(math.Round(minutes*0.5)))
	for i := range nRuns {
		g.run(i, g.between(d/20, time.Duration(float64(d)*0.55)))
	}
	nBoard := max(2, int(math.Round(minutes*1.5)))
	for range nBoard {
		g.boardTask(g.between(d/20, arrive))
	}
	g.reuse()
	g.accounts()
	g.faults()

	slices.SortStableFunc(g.steps, func(a, b Step) int {
		if a.At != b.At {
			return int(a.At - b.At)
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
	return Mix{Seed: seed, Duration: d, Scale: scale, Steps: g.steps}
}

// phase draws one phase: short (a second or two), or one to several of
// the fence's sweep periods (a minute, scaled), never under a second.
func (g *gen) phase(id string) PhaseSpec {
	sweep := g.scaled(time.Minute)
	var delay time.Duration
	switch x := g.r.Float64(); {
	case x < 0.4:
		delay = g.between(time.Second, 2*time.Second)
	case x < 0.8:
		delay = g.between(sweep, 3*sweep)
	default:
		delay = g.between(3*sweep, 6*sweep)
	}
	delay = max(delay, time.Second)
	p := PhaseSpec{ID: id, Delay: delay, Cost: float64(5+g.r.IntN(21)) / 100}
	if g.chance(0.15) {
		p.Fail = 1
	}
	return p
}

func (g *gen) phases() []PhaseSpec {
	out := make([]PhaseSpec, len(Phases))
	for i, id := range Phases {
		out[i] = g.phase(id)
	}
	return out
}

// limit makes one phase meet a usage limit: near (minutes, scaled) or far
// (hours, scaled) when the far one still ends well before d.
func (g *gen) limit(ps []PhaseSpec, at time.Duration, far bool) int {
	i := g.r.IntN(len(ps))
	reset := g.scaled(g.between(2*time.Minute, 15*time.Minute))
	if far {
		f := g.scaled(g.between(time.Hour, 3*time.Hour))
		if at+f+2*(TaskSpec{Phases: ps}).Work() < time.Duration(float64(g.d)*0.85) {
			reset = f
		}
	}
	ps[i].Limit = max(reset, time.Second)
	ps[i].Fail = 0
	return i
}

// task adds a standalone task arriving at at, and what is done to it.
func (g *gen) task(at time.Duration) {
	g.seq++
	t := TaskSpec{ID: fmt.Sprintf("S%03d", g.seq), Phases: g.phases()}
	switch x := g.r.Float64(); {
	case x < 0.35: // the worker's default account, shared by every such task
	case x < 0.65:
		t.Account = sharedAccounts[g.r.IntN(len(sharedAccounts))]
	case x < 0.8:
		t.Pool = Pool
	default:
		t.Account = "solo-" + strings.ToLower(t.ID)
	}
	limitAt := -1
	if g.chance(0.2) {
		limitAt = g.limit(t.Phases, at, g.chance(0.3))
	}
	if limitAt < 0 && g.chance(0.1) {
		i := g.r.IntN(len(t.Phases))
		t.StallAfterSec = 2 + g.r.IntN(2)
		t.OnStall = []string{"warn", "redispatch", "abort"}[g.r.IntN(3)]
		t.Phases[i].Stall = time.Duration(t.StallAfterSec)*time.Second + g.between(2*time.Second, 4*time.Second)
	}
	if limitAt < 0 && g.chance(0.04) {
		t.Phases[g.r.IntN(len(t.Phases))].Die = true
	}
	work := t.Work()
	if g.chance(0.3) {
		action := []string{"block", "warn", "pause"}[g.r.IntN(3)]
		if action == "block" {
			// A blocking budget may be passed by the phase in flight: the
			// stop takes the same wall time at any scale (a loaded
			// machine's seconds), so the phases are made long enough
			// that it always lands within the next one.
			for i := range t.Phases {
				t.Phases[i].Delay = max(t.Phases[i].Delay, blockPhase)
			}
			work = t.Work()
		}
		usd := math.Max(0.01, math.Round(t.Cost()*(0.35+0.4*g.r.Float64())*100)/100)
		t.Budget = &Budget{LimitUSD: usd, Action: action}
		if action == "pause" {
			// A budget pause must outlive what its account goes through
			// meanwhile (another task's limit, a person's resume of the
			// account): the task is on a shared account, and a person
			// raises its budget (or resumes it) a while after it paused;
			// once more late, in case the first came before the pause.
			if strings.HasPrefix(t.Account, "solo-") || t.Pool != "" {
				t.Account, t.Pool = sharedAccounts[g.r.IntN(len(sharedAccounts))], ""
			}
			when := at + work + g.between(10*time.Second, 40*time.Second)
			if g.chance(0.7) {
				g.add(Step{At: when, Kind: StepBudgetRaise, Task: t.ID, BudgetUSD: math.Round(t.Cost()*300)/100 + 1})
			} else {
				g.add(Step{At: when, Kind: StepResume, Task: t.ID})
			}
			g.add(Step{At: time.Duration(float64(g.d) * 0.9), Kind: StepBudgetRaise, Task: t.ID, BudgetUSD: math.Round(t.Cost()*500)/100 + 2})
		}
	}
	if limitAt >= 0 && g.chance(0.25) {
		var before time.Duration
		for _, p := range t.Phases[:limitAt] {
			before += p.Delay
		}
		g.add(Step{At: at + before + g.between(time.Second, 4*time.Second), Kind: StepResume, Task: t.ID})
	}
	switch x := g.r.Float64(); {
	case x < 0.06:
		g.add(Step{At: at + g.between(0, work+time.Second), Kind: StepAbort, Task: t.ID})
	case x < 0.14:
		g.add(Step{At: at + g.between(0, work+time.Second), Kind: StepRedispatch, Task: t.ID})
	}
	g.add(Step{At: at, Kind: StepStartTask, Task: t.ID, Spec: &t})
}

// run adds a run of 3 to 5 tasks, each waiting for up to two earlier ones.
func (g *gen) run(i int, at time.Duration) {
	r := RunSpec{Slug: fmt.Sprintf("soak-run-%d", i+1), Concurrency: 2 + g.r.IntN(2)}
	if g.chance(0.4) {
		r.Pool = Pool
	}
	n := 3 + g.r.IntN(3)
	var cost float64
	var work time.Duration
	for j := range n {
		t := TaskSpec{ID: fmt.Sprintf("R%d%c", i+1, 'a'+j), Phases: g.phases()}
		if g.chance(0.15) {
			g.limit(t.Phases, at, false)
		}
		var deps []string
		for k := range j {
			if g.chance(0.4) && len(deps) < 2 {
				deps = append(deps, r.Tasks[k].Spec.ID)
			}
		}
		r.Tasks = append(r.Tasks, RunTask{Spec: t, Depends: deps})
		cost += t.Cost()
		work += t.Work()
	}
	if g.chance(0.35) {
		action := []string{"block", "warn", "pause"}[g.r.IntN(3)]
		r.Budget = &Budget{LimitUSD: math.Max(0.01, math.Round(cost*(0.5+0.4*g.r.Float64())*100)/100), Action: action}
		if action == "pause" {
			g.add(Step{At: at + work/2 + g.between(2*time.Second, 10*time.Second), Kind: StepRunBudgetRaise, Run: r.Slug, BudgetUSD: math.Round(cost*300)/100 + 1})
			g.add(Step{At: time.Duration(float64(g.d) * 0.9), Kind: StepRunBudgetRaise, Run: r.Slug, BudgetUSD: math.Round(cost*500)/100 + 2})
		}
	}
	g.add(Step{At: at, Kind: StepStartRun, Run: r.Slug, RunSpec: &r})
}

// boardTask adds a task the intake takes from karvi's board, and what a
// person does to it there.
func (g *gen) boardTask(at time.Duration) {
	g.seq++
	t := TaskSpec{ID: fmt.Sprintf("B%03d", g.seq), Phases: g.phases()}
	if g.chance(0.15) {
		g.limit(t.Phases, at, false)
	}
	work := t.Work()
	switch x := g.r.Float64(); {
	case x < 0.2:
		g.add(Step{At: at + g.between(time.Second, work+2*time.Second), Kind: StepBoardCancel, Task: t.ID})
	case x < 0.45:
		g.add(Step{At: at + work + g.between(4*time.Second, 12*time.Second), Kind: StepBoardSendBack, Task: t.ID})
	}
	g.add(Step{At: at, Kind: StepBoardTask, Task: t.ID, Spec: &t})
}

// reuse puts a few standalone tasks' ids back on the board as new tasks,
// well after they should have ended.
func (g *gen) reuse() {
	var starts []Step
	for _, s := range g.steps {
		if s.Kind == StepStartTask && s.Spec.Budget == nil && !s.Spec.Limited() && s.Spec.OnStall == "" &&
			s.At+s.Spec.Work()+30*time.Second < time.Duration(float64(g.d)*0.75) {
			starts = append(starts, s)
		}
	}
	for range min(len(starts), max(1, int(g.d.Minutes()/3))) {
		i := g.r.IntN(len(starts))
		s := starts[i]
		starts = append(starts[:i], starts[i+1:]...)
		t := TaskSpec{ID: s.Task, Phases: g.phases()}
		g.add(Step{At: s.At + s.Spec.Work() + g.between(20*time.Second, 40*time.Second), Kind: StepBoardReuse, Task: s.Task, Spec: &t})
	}
}

// accounts adds a person's account resumes and changes to the pool's limit.
func (g *gen) accounts() {
	n := max(2, int(g.d.Minutes()/1.5))
	for range n {
		g.add(Step{At: g.between(g.d/5, time.Duration(float64(g.d)*0.8)), Kind: StepAccountResume,
			Account: sharedAccounts[g.r.IntN(len(sharedAccounts))]})
	}
	g.add(Step{At: 0, Kind: StepPoolLimit, Pool: Pool, Count: 2})
	for range max(1, int(g.d.Minutes()/4)) {
		g.add(Step{At: g.between(g.d/10, time.Duration(float64(g.d)*0.7)), Kind: StepPoolLimit, Pool: Pool, Count: 1 + g.r.IntN(4)})
	}
}

// faults adds the machine's and karvi's faults: the first host's worker
// killed several times, each time back within half its host grace (5
// minutes, scaled) so its tasks are not given up; karvi's refusals and one
// restart of karvi; one restart of the Temporal server.
func (g *gen) faults() {
	kills := min(40, max(2, int(g.d/(40*time.Second))))
	grace := g.scaled(5 * time.Minute)
	span := time.Duration(float64(g.d) * 0.8)
	for i := range kills {
		// One kill per slice of the soak, so that kills never overlap.
		lo := g.d/10 + span*time.Duration(i)/time.Duration(kills)
		hi := g.d/10 + span*time.Duration(i+1)/time.Duration(kills) - 4*time.Second
		at := g.between(lo, max(lo, hi))
		down := g.between(300*time.Millisecond, max(400*time.Millisecond, min(3*time.Second, grace*2/5)))
		g.add(Step{At: at, Kind: StepKillWorker, Host: Hosts[0]})
		g.add(Step{At: at + down, Kind: StepRestartWorker, Host: Hosts[0]})
	}
	for range max(1, int(g.d.Minutes()/2)) {
		g.add(Step{At: g.between(g.d/10, time.Duration(float64(g.d)*0.8)), Kind: StepKarvi429, Count: 2 + g.r.IntN(4)})
	}
	for range max(2, int(g.d.Minutes())) {
		g.add(Step{At: g.between(g.d/10, time.Duration(float64(g.d)*0.8)), Kind: StepKarviConflict, Count: 1 + g.r.IntN(2)})
	}
	g.add(Step{At: g.between(g.d/4, g.d/2), Kind: StepKarviRestart, Down: g.between(time.Second, 3*time.Second)})
	g.add(Step{At: g.between(time.Duration(float64(g.d)*0.4), time.Duration(float64(g.d)*0.6)), Kind: StepServerRestart})
}

// Counts counts the mix's steps by kind, and its tasks (standalone, in
// runs and on the board) under "tasks".
func (m Mix) Counts() map[string]int {
	c := map[string]int{}
	for _, s := range m.Steps {
		c[string(s.Kind)]++
		switch s.Kind {
		case StepStartTask, StepBoardTask:
			c["tasks"]++
		case StepStartRun:
			c["tasks"] += len(s.RunSpec.Tasks)
		}
	}
	return c
}

// Task finds the spec of a task of the mix by id, wherever it starts.
func (m Mix) Task(id string) (TaskSpec, bool) {
	for _, s := range m.Steps {
		if s.Spec != nil && s.Spec.ID == id {
			return *s.Spec, true
		}
		if s.RunSpec != nil {
			for _, t := range s.RunSpec.Tasks {
				if t.Spec.ID == id {
					return t.Spec, true
				}
			}
		}
	}
	return TaskSpec{}, false
}
