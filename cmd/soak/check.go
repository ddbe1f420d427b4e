package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/soak"
	"karvi-edda-temporal/soak/observe"
)

// soakChecker is the soak's checks (soak/observe): a sampler of live
// conductors and open tasks' status while the soak runs, the final
// collection and the invariants over it, and the leftovers once the
// driver stopped everything.
type soakChecker struct {
	d   *driver
	obs *observe.Checker
	// problems are what the collectors could not read: reported, never
	// violations.
	problems []string
	mu       sync.Mutex
	// seen are the live violations already logged.
	seen map[string]bool
}

func newChecker(d *driver) *soakChecker {
	src := observe.Sources{
		Board:        observe.FakeBoard(d.karvi),
		Workflows:    observe.TemporalWorkflows(d.cl),
		JournalPath:  d.journal.Path(),
		WebhooksPath: filepath.Join(d.cfg.out, "webhooks.jsonl"),
	}
	for _, name := range soak.Hosts {
		h := d.hosts[name]
		src.Roots = append(src.Roots, observe.Root{Host: name, Dir: h.workRoot})
		src.WorkerLogs = append(src.WorkerLogs, observe.WorkerLog{Host: name, Path: h.opts.LogPath})
	}
	return &soakChecker{d: d, seen: map[string]bool{},
		obs: observe.NewChecker(observe.CheckerConfig{Sources: src, ObservedPath: filepath.Join(d.cfg.out, "observed.json")})}
}

// Start begins sampling, and judges the timeline so far every half
// minute, logging what it finds as it finds it (the final checks judge
// the whole timeline again).
func (c *soakChecker) Start(ctx context.Context) {
	c.obs.Start(ctx)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(30 * time.Second):
			}
			vs, err := c.obs.Live()
			if err != nil {
				c.d.logf("live checks: %v", err)
			}
			c.mu.Lock()
			for _, v := range vs {
				if k := v.String(); !c.seen[k] {
					c.seen[k] = true
					c.d.logf("VIOLATION (live): %s", k)
				}
			}
			c.mu.Unlock()
		}
	}()
}

// liveViolations counts the violations the live checks found so far.
func (c *soakChecker) liveViolations() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// Watch follows a task from its start.
func (c *soakChecker) Watch(task string) { c.obs.Watch(task) }

// Final records how every workflow ended (the server stops next), says
// where each task still open stands, and judges every invariant but the
// leftovers.
func (c *soakChecker) Final(ctx context.Context) []soak.Violation {
	d := c.d
	d.snapshot(ctx)
	for _, id := range d.order {
		if st, _ := d.workflowStatusCached(ctx, taskapi.WorkflowID(id)); st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			d.logf("open at the end: %s: %s", id, d.whereIs(ctx, id))
		}
	}
	var refs []observe.TaskRef
	for _, id := range d.order {
		refs = append(refs, observe.TaskRef{ID: id, Run: d.tasks[id].run})
	}
	vs, err := c.obs.Final(ctx, refs, d.runs)
	if err != nil {
		c.problems = append(c.problems, err.Error())
		d.logf("final checks could not read everything: %v", err)
	}
	return vs
}

// Leftovers judges what still runs once the driver stopped everything:
// every worker process it ran, the dev server, every conductor run's
// processes.
func (c *soakChecker) Leftovers(context.Context) []soak.Violation {
	d := c.d
	var started []observe.Started
	for _, name := range soak.Hosts {
		for _, pid := range d.hosts[name].pids {
			started = append(started, observe.Started{PID: pid, What: "worker", Host: name})
		}
	}
	if d.serverPID > 0 {
		started = append(started, observe.Started{PID: d.serverPID, What: "temporal"})
	}
	vs, err := c.obs.Leftovers(started)
	if err != nil {
		c.problems = append(c.problems, err.Error())
		d.logf("leftover check could not read everything: %v", err)
	}
	return vs
}

// whereIs says where an open task's workflow stands: its status query and
// the activities it waits on, for a person to start from.
func (d *driver) whereIs(ctx context.Context, id string) string {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var parts []string
	tasks := taskapi.Tasks{Client: d.cl}
	if st, err := tasks.Status(cctx, id); err != nil {
		parts = append(parts, "status query: "+err.Error())
	} else {
		p := fmt.Sprintf("stage %s, attempt %d, plan %s, phase %s %s, host %s, task status %s", st.Stage, st.Attempt, st.PlanName, st.CurrentPhase, st.PhaseStatus, st.Host, st.TaskStatus)
		if st.Pause != nil {
			p += fmt.Sprintf(", paused (%s) since %s until %s", st.Pause.Reason, st.Pause.Since.Format(time.RFC3339), st.Pause.Until.Format(time.RFC3339))
		}
		if st.Slot != nil {
			p += ", slot " + st.Slot.State
		}
		parts = append(parts, p)
	}
	if desc, err := tasks.Describe(cctx, id, ""); err == nil {
		for _, a := range desc.GetPendingActivities() {
			parts = append(parts, fmt.Sprintf("pending %s (%s, attempt %d, last error %q)", a.GetActivityType().GetName(), a.GetState(), a.GetAttempt(), a.GetLastFailure().GetMessage()))
		}
	}
	return strings.Join(parts, "; ")
}

// snapshot records how every task and run workflow stands, while the
// server still runs.
func (d *driver) snapshot(ctx context.Context) {
	ended := map[string]enumspb.WorkflowExecutionStatus{}
	for _, id := range d.order {
		if st, found := d.workflowStatus(ctx, taskapi.WorkflowID(id)); found {
			ended[taskapi.WorkflowID(id)] = st
		}
	}
	for _, slug := range d.runs {
		if st, found := d.workflowStatus(ctx, runapi.WorkflowID(slug)); found {
			ended[runapi.WorkflowID(slug)] = st
		}
	}
	d.mu.Lock()
	d.ended = ended
	d.mu.Unlock()
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
		return data[i+2] != 'Z' && data[i+2] != 'X'
	}
	return true
}
