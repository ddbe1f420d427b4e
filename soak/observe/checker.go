package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"karvi-edda-temporal/soak"
)

// CheckerConfig is what a Checker needs: where to read (Sources; its
// Samples are the Checker's own), how to sample, how to judge, and where
// to keep the observation.
type CheckerConfig struct {
	Sources Sources
	// Sampler tunes the sampling; its Roots and Workflows default to the
	// Sources'.
	Sampler SamplerConfig
	// Check tunes the invariants (soak.DefaultConfig's values for zero
	// fields).
	Check soak.Config
	// ObservedPath, when set, receives the observation the final checks
	// judged (JSON), for a person reading a violation's context.
	ObservedPath string
}

// Checker runs a soak's checks: Start samples while the soak runs, Live
// judges the timeline so far, Final reads what the soak left and judges
// everything, Leftovers what still runs after the driver stopped all it
// started.
type Checker struct {
	cfg     CheckerConfig
	sampler *Sampler
	start   time.Time

	mu       sync.Mutex
	observed soak.Observed
}

// NewChecker returns a checker; Start begins its sampling.
func NewChecker(cfg CheckerConfig) *Checker {
	if cfg.Sampler.Roots == nil {
		cfg.Sampler.Roots = cfg.Sources.Roots
	}
	if cfg.Sampler.Workflows == nil {
		cfg.Sampler.Workflows = cfg.Sources.Workflows
	}
	return &Checker{cfg: cfg, sampler: NewSampler(cfg.Sampler)}
}

// Sampler is the checker's sampler (Watch a task, read its Stats).
func (c *Checker) Sampler() *Sampler { return c.sampler }

// Watch follows a task from now on (a task started, or opened again).
func (c *Checker) Watch(task string) { c.sampler.Watch(task) }

// Start begins sampling.
func (c *Checker) Start(ctx context.Context) {
	c.start = time.Now()
	c.sampler.Start(ctx)
}

// Live judges the timeline so far and the workers' fence lines: the
// continuous invariants, while the soak runs.
func (c *Checker) Live() ([]soak.Violation, error) {
	o := soak.Observed{Start: c.start, End: time.Now(), Samples: c.sampler.Samples()}
	var errs []error
	for _, l := range c.cfg.Sources.WorkerLogs {
		fs, err := ReadFenceStops(l.Path, l.Host)
		errs = append(errs, err)
		o.FenceStops = append(o.FenceStops, fs...)
	}
	if c.cfg.Sources.JournalPath != "" {
		j, err := ReadJournal(c.cfg.Sources.JournalPath)
		errs = append(errs, err)
		o.Journal = j
	}
	return soak.CheckLive(&o, c.cfg.Check), errors.Join(errs...)
}

// Final stops the sampling, reads the soak's end state (call it while the
// server and the workers still run: closed workflows answer queries by
// replaying on a worker) and judges every invariant but the leftovers.
// tasks and runs add to the Sources' (the driver knows what it started).
// The error reports what could not be read; the violations are judged on
// the rest.
func (c *Checker) Final(ctx context.Context, tasks []TaskRef, runs []string) ([]soak.Violation, error) {
	c.sampler.Stop()
	src := c.cfg.Sources
	src.Samples = c.sampler.Samples()
	src.Tasks = append(append([]TaskRef(nil), src.Tasks...), tasks...)
	src.Runs = append(append([]string(nil), src.Runs...), runs...)
	for _, t := range c.sampler.Tasks() {
		src.Tasks = append(src.Tasks, TaskRef{ID: t})
	}
	o, err := Collect(ctx, src, c.start, time.Now())
	c.mu.Lock()
	c.observed = o
	c.mu.Unlock()
	vs := soak.CheckAll(&o, c.cfg.Check)
	if werr := c.save(); werr != nil {
		err = errors.Join(err, werr)
	}
	return vs, err
}

// Leftovers lists what still runs once the driver stopped everything it
// started (started: its workers, its server) and judges it.
func (c *Checker) Leftovers(started []Started) ([]soak.Violation, error) {
	left, err := Leftovers(c.cfg.Sources.Roots, started)
	c.mu.Lock()
	c.observed.Leftovers = left
	c.observed.End = time.Now()
	o := c.observed
	c.mu.Unlock()
	vs := soak.CheckNothingLeftRunning(&o, c.cfg.Check)
	if werr := c.save(); werr != nil {
		err = errors.Join(err, werr)
	}
	return vs, err
}

// Observed is the observation the last Final or Leftovers judged.
func (c *Checker) Observed() soak.Observed {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.observed
}

func (c *Checker) save() error {
	if c.cfg.ObservedPath == "" {
		return nil
	}
	c.mu.Lock()
	data, err := json.Marshal(c.observed)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode observation: %w", err)
	}
	tmp := c.cfg.ObservedPath + ".tmp"
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write observation: %w", err)
	}
	return os.Rename(tmp, c.cfg.ObservedPath)
}
