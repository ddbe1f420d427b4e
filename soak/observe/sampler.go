package observe

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/soak"
)

// SamplerConfig tunes a Sampler. Zero values take the defaults noted.
type SamplerConfig struct {
	// Roots are the worker hosts' work roots.
	Roots []Root
	// Workflows answers the status and cost queries; nil samples only
	// processes.
	Workflows Workflows
	// Every is the tick (default 200ms): each tick scans /proc once.
	Every time.Duration
	// QueriesPerTick bounds the status queries of one tick (default 4),
	// TaskEvery how often one task is asked (default 1s), Parallel how
	// many queries run at once (default 2) and QueryTimeout each one
	// (default 2s). Open tasks are asked in turn, the least recently
	// asked first, so a loaded server sees at most
	// QueriesPerTick/Every queries a second whatever the number of tasks.
	QueriesPerTick int
	TaskEvery      time.Duration
	Parallel       int
	QueryTimeout   time.Duration
	// KeepEvery is how often a sample that shows nothing new is kept
	// anyway (default 1s): a long soak's timeline stays small while a
	// conductor that lives on still shows in it at least that often.
	KeepEvery time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c SamplerConfig) withDefaults() SamplerConfig {
	if c.Every <= 0 {
		c.Every = 200 * time.Millisecond
	}
	if c.QueriesPerTick <= 0 {
		c.QueriesPerTick = 4
	}
	if c.TaskEvery <= 0 {
		c.TaskEvery = time.Second
	}
	if c.Parallel <= 0 {
		c.Parallel = 2
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = 2 * time.Second
	}
	if c.KeepEvery <= 0 {
		c.KeepEvery = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// SamplerStats says what a Sampler did and what it cost.
type SamplerStats struct {
	// Ticks counts the scans of the process table, Kept the samples of it
	// kept; Queries the queries asked (status and cost).
	Ticks, Kept, Queries, QueryErrors, ScanErrors int
	// Busiest is the longest scan of the process table.
	Busiest time.Duration
	// LastError is the latest scan or query error, for the report.
	LastError string
}

// watched is one task the Sampler asks about.
type watched struct {
	open   bool
	asked  time.Time
	budget bool // asks the cost query too: the task has a budget
	costed bool // the cost query was asked once
	plans  map[string]bool
	// absent counts the answers in a row that found no workflow: such a
	// task (not started yet, or cancelled before it ran) is asked less
	// and less often, up to once every 16 TaskEvery.
	absent int
}

// every is how often the task is asked.
func (w *watched) every(base time.Duration) time.Duration {
	return base << min(w.absent, 4)
}

// Sampler watches a soak while it runs: each tick it records the live
// conductors under the work roots, and the status of some open tasks, so
// the continuous invariants (soak.LiveChecks) can be judged on its
// timeline. Tasks are found by their run directories, and by Watch.
type Sampler struct {
	cfg  SamplerConfig
	runs *runIndex

	mu      sync.Mutex
	tasks   map[string]*watched
	samples []soak.Sample
	last    []soak.LiveConductor
	kept    time.Time
	found   time.Time
	stats   SamplerStats

	stop chan struct{}
	done chan struct{}
}

// NewSampler returns a sampler; Start runs it.
func NewSampler(cfg SamplerConfig) *Sampler {
	return &Sampler{cfg: cfg.withDefaults(), runs: newRunIndex(), tasks: map[string]*watched{}}
}

// Watch asks the sampler to follow a task (again: a task sent back or
// redispatched after it ended is open once more).
func (s *Sampler) Watch(task string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watchLocked(task)
	w.open, w.absent = true, 0
}

func (s *Sampler) watchLocked(task string) *watched {
	w, ok := s.tasks[task]
	if !ok {
		w = &watched{open: true, plans: map[string]bool{}}
		s.tasks[task] = w
	}
	return w
}

// Start runs the sampler until Stop or ctx ends: the process table is
// scanned every tick, and the queries run on a loop of their own, so a
// server that answers slowly (or not, while it restarts) leaves no gap in
// the process timeline.
func (s *Sampler) Start(ctx context.Context) {
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	loop := func(tick func(context.Context)) {
		defer wg.Done()
		t := time.NewTicker(s.cfg.Every)
		defer t.Stop()
		for {
			tick(ctx)
			select {
			case <-ctx.Done():
				return
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}
	wg.Add(2)
	go loop(s.TickProcesses)
	go loop(s.TickQueries)
	go func() {
		wg.Wait()
		close(s.done)
	}()
}

// Stop ends the sampling and waits for the ticks under way.
func (s *Sampler) Stop() {
	if s.stop == nil {
		return
	}
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// Samples returns the timeline so far, in time order.
func (s *Sampler) Samples() []soak.Sample {
	s.mu.Lock()
	out := slices.Clone(s.samples)
	s.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// Stats returns what the sampler did so far.
func (s *Sampler) Stats() SamplerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Tasks lists every task the sampler saw or was told of.
func (s *Sampler) Tasks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.tasks))
	for t := range s.tasks {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Tick takes one sample of each kind: the process table, then the
// statuses of the open tasks whose turn it is. A test may call it by hand.
func (s *Sampler) Tick(ctx context.Context) {
	s.TickProcesses(ctx)
	s.TickQueries(ctx)
}

// TickProcesses records the live conductors, when they changed or
// KeepEvery passed since the last such sample.
func (s *Sampler) TickProcesses(context.Context) {
	begin := time.Now()
	at := s.cfg.Now()
	conductors, err := s.scan()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Ticks++
	if err != nil {
		s.stats.ScanErrors++
		s.stats.LastError = err.Error()
	} else if !slices.Equal(conductors, s.last) || at.Sub(s.kept) >= s.cfg.KeepEvery {
		s.samples = append(s.samples, soak.Sample{At: at, Conductors: conductors})
		s.last, s.kept = conductors, at
		s.stats.Kept++
	}
	s.stats.Busiest = max(s.stats.Busiest, time.Since(begin))
}

// TickQueries asks the open tasks whose turn it is and records their
// answers, stamped with when they were asked.
func (s *Sampler) TickQueries(ctx context.Context) {
	at := s.cfg.Now()
	s.mu.Lock()
	if at.Sub(s.found) >= s.cfg.KeepEvery {
		// Listing every task's run directories costs a readdir per task:
		// done once every KeepEvery, not on every tick.
		s.discoverLocked()
		s.found = at
	}
	due := s.dueLocked(at)
	s.mu.Unlock()
	tasks := s.ask(ctx, due)
	if len(tasks) == 0 {
		return
	}
	s.mu.Lock()
	s.samples = append(s.samples, soak.Sample{At: at, Tasks: tasks})
	s.mu.Unlock()
}

// scan lists the live conductors from one pass over /proc.
func (s *Sampler) scan() ([]soak.LiveConductor, error) {
	runs, err := s.runs.runs(s.cfg.Roots)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, nil
	}
	ps, err := proc.Processes()
	if err != nil {
		return nil, err
	}
	return liveConductors(runs, ps), nil
}

// discoverLocked watches every task with a run directory, and opens again
// a task with a new one (an attempt started after its workflow ended).
func (s *Sampler) discoverLocked() {
	for _, r := range s.cfg.Roots {
		tasks, err := os.ReadDir(filepath.Join(r.Dir, "runs"))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			if !t.IsDir() {
				continue
			}
			plans, err := os.ReadDir(filepath.Join(r.Dir, "runs", t.Name()))
			if err != nil {
				continue
			}
			w := s.watchLocked(t.Name())
			for _, p := range plans {
				key := r.Host + "/" + p.Name()
				if !w.plans[key] {
					w.plans[key] = true
					w.open, w.absent = true, 0
				}
			}
		}
	}
}

// dueLocked picks the open tasks to ask this tick: not asked within
// TaskEvery, the least recently asked first, at most QueriesPerTick.
func (s *Sampler) dueLocked(now time.Time) []string {
	if s.cfg.Workflows == nil {
		return nil
	}
	var due []string
	for id, w := range s.tasks {
		if w.open && now.Sub(w.asked) >= w.every(s.cfg.TaskEvery) {
			due = append(due, id)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		a, b := s.tasks[due[i]].asked, s.tasks[due[j]].asked
		if !a.Equal(b) {
			return a.Before(b)
		}
		return due[i] < due[j]
	})
	if len(due) > s.cfg.QueriesPerTick {
		due = due[:s.cfg.QueriesPerTick]
	}
	for _, id := range due {
		s.tasks[id].asked = now
	}
	return due
}

// ask queries the due tasks, Parallel at a time, and returns the answers
// in task order. A task whose workflow ended is asked no more until it is
// opened again; one that answered nothing is asked again on its turn.
func (s *Sampler) ask(ctx context.Context, due []string) []soak.TaskSample {
	if len(due) == 0 {
		return nil
	}
	results := make([]*soak.TaskSample, len(due))
	sem := make(chan struct{}, s.cfg.Parallel)
	var wg sync.WaitGroup
	for i, id := range due {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = s.askOne(ctx, id)
		}()
	}
	wg.Wait()
	var out []soak.TaskSample
	for _, r := range results {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out
}

func (s *Sampler) askOne(ctx context.Context, id string) *soak.TaskSample {
	qctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	st, found, err := s.cfg.Workflows.Status(qctx, id)
	s.mu.Lock()
	w := s.tasks[id]
	s.stats.Queries++
	if err != nil {
		s.stats.QueryErrors++
		s.stats.LastError = err.Error()
	}
	askCost := found && err == nil && st.Open && (w.budget || !w.costed)
	switch {
	case err == nil && !found:
		w.absent++
	case found:
		w.absent = 0
	}
	s.mu.Unlock()
	if err != nil || !found {
		return nil
	}
	if askCost {
		spent, b, cerr := s.cfg.Workflows.Cost(qctx, id)
		s.mu.Lock()
		s.stats.Queries++
		if cerr != nil {
			s.stats.QueryErrors++
			s.stats.LastError = cerr.Error()
		} else {
			w.costed, w.budget = true, b != nil
			st.HasCost, st.CostUSD, st.Budget = true, spent, b
		}
		s.mu.Unlock()
	}
	if !st.Open {
		s.mu.Lock()
		w.open = false
		s.mu.Unlock()
	}
	return &st
}
