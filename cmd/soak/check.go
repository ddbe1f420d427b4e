package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/soak"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/workflows/runflow/runapi"
	"karvi-edda-temporal/workflows/taskflow/taskapi"
)

// endChecker is the driver's own end checks: every task ended, no
// conductor outlived its task, nothing the soak started is left running.
type endChecker struct{ d *driver }

func newChecker(d *driver) checker { return &endChecker{d: d} }

func (c *endChecker) Start(context.Context) {}

// Final records how every workflow ended (the server stops next) and
// checks that each task ended and no conductor lives on.
func (c *endChecker) Final(ctx context.Context) []soak.Violation {
	d := c.d
	d.snapshot(ctx)
	var vs []soak.Violation
	now := time.Now()
	for _, id := range d.order {
		t := d.tasks[id]
		st, found := d.workflowStatusCached(ctx, taskapi.WorkflowID(id))
		switch {
		case st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			vs = append(vs, soak.Violation{Invariant: soak.InvEndsOnceAndAgrees, Task: id, At: now,
				Evidence: fmt.Sprintf("%s task still running when the soak ended (drain bound passed): %s", t.origin, d.whereIs(ctx, id))})
		case !found && t.origin == originStandalone && t.err == nil:
			vs = append(vs, soak.Violation{Invariant: soak.InvEndsOnceAndAgrees, Task: id, At: now,
				Evidence: "the soak started it, but the server has no workflow of it"})
		case !found && t.origin == originBoard:
			if kt, ok := d.karvi.Task(id); ok && kt.Status == "dispatched" {
				vs = append(vs, soak.Violation{Invariant: soak.InvEndsOnceAndAgrees, Task: id, At: now,
					Evidence: "dispatched on karvi's board with the runtime's hint, never taken by the intake"})
			}
		}
	}
	// A conductor's exit takes a moment after its workflow ended (the
	// stop grace, a linger): wait before calling one left behind.
	var live []devenv.Run
	deadline := time.Now().Add(30 * time.Second)
	for {
		live = c.liveRuns()
		if len(live) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, r := range live {
		vs = append(vs, soak.Violation{Invariant: soak.InvNoProcessOutlivesAttempt, Task: r.TaskID, At: time.Now(),
			Evidence: fmt.Sprintf("conductor of %s (pid %d) still running 30s after every workflow ended", r.Plan, r.Handle.PID)})
	}
	return vs
}

// liveRuns are the conductor runs under every host's work root with a
// running process.
func (c *endChecker) liveRuns() []devenv.Run {
	var live []devenv.Run
	for _, h := range c.d.hosts {
		runs, err := devenv.Runs(h.workRoot)
		if err != nil {
			c.d.logf("runs of %s: %v", h.name, err)
			continue
		}
		for _, r := range runs {
			st, err := proc.Inspect(r.Handle)
			if err == nil && (st.Alive || st.GroupAlive) {
				live = append(live, r)
			}
		}
	}
	return live
}

// Leftovers checks, after the driver stopped everything it started, that
// nothing is left: no worker, no dev server, no process of any conductor
// run (an agent that left its group included).
func (c *endChecker) Leftovers(context.Context) []soak.Violation {
	d := c.d
	var vs []soak.Violation
	left := func(pid int, what string) {
		if pid > 0 && alive(pid) {
			vs = append(vs, soak.Violation{Invariant: soak.InvNothingLeftRunning, At: time.Now(),
				Evidence: fmt.Sprintf("%s (pid %d) still running after the soak stopped it", what, pid)})
		}
	}
	for _, h := range d.hosts {
		for _, pid := range h.pids {
			left(pid, "worker "+h.name)
		}
	}
	left(d.serverPID, "temporal dev server")
	tokens := map[string]string{}
	for _, h := range d.hosts {
		runs, _ := devenv.Runs(h.workRoot)
		for _, r := range runs {
			if r.Handle.Token != "" {
				tokens[proc.TokenEnv+"="+r.Handle.Token] = r.TaskID + "/" + r.Plan
			}
		}
	}
	if len(tokens) > 0 {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil {
				continue
			}
			for kv := range bytes.SplitSeq(env, []byte{0}) {
				if run, ok := tokens[string(kv)]; ok && alive(pid) {
					vs = append(vs, soak.Violation{Invariant: soak.InvNothingLeftRunning, At: time.Now(),
						Evidence: fmt.Sprintf("process %d (%s) of conductor run %s still running after the soak stopped everything", pid, cmdlineString(pid), run)})
					break
				}
			}
		}
	}
	return vs
}

// whereIs says where an open task's workflow stands: its status query and
// the activities it waits on, for a person to start from.
func (d *driver) whereIs(ctx context.Context, id string) string {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var parts []string
	if v, err := d.cl.QueryWorkflow(cctx, taskapi.WorkflowID(id), "", taskapi.QueryStatus); err != nil {
		parts = append(parts, "status query: "+err.Error())
	} else {
		var st taskapi.Status
		if err := v.Get(&st); err == nil {
			p := fmt.Sprintf("stage %s, attempt %d, plan %s, phase %s %s, host %s, task status %s", st.Stage, st.Attempt, st.PlanName, st.CurrentPhase, st.PhaseStatus, st.Host, st.TaskStatus)
			if st.Pause != nil {
				p += fmt.Sprintf(", paused (%s) since %s until %s", st.Pause.Reason, st.Pause.Since.Format(time.RFC3339), st.Pause.Until.Format(time.RFC3339))
			}
			if st.Slot != nil {
				p += ", slot " + st.Slot.State
			}
			parts = append(parts, p)
		}
	}
	if desc, err := d.cl.DescribeWorkflowExecution(cctx, taskapi.WorkflowID(id), ""); err == nil {
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

func cmdlineString(pid int) string {
	args := cmdline(pid)
	if len(args) == 0 {
		return "?"
	}
	return filepath.Base(args[0])
}
