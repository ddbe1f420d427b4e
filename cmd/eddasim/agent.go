package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Agent outcomes, the simulator's version of edda's PhaseResult.
const (
	agentDone     = "done"
	agentCrash    = "crash"
	agentTimeout  = "timeout"
	agentMaxTurns = "max_turns"
	agentBudget   = "budget_exceeded"
	agentShutdown = "shutdown" // SIGINT to the conductor
)

type agentResult struct {
	kind  string
	cost  *float64
	error string // crash message
	// limitReset is set when the agent met a usage limit (limit.go).
	limitReset time.Time
	// codex: the limit is written as the Codex CLI does (turn.failed).
	codex bool
}

// agentChildArg is the hidden subcommand a `child` agent runs as.
const agentChildArg = "__agent"

// runAgentChild is the body of a child agent: sleep, or sleep until killed.
// With a second argument, a pid file, it first starts a process of its own
// that outlives it (as an agent's background build or server does), in its
// process group, and records that process's pid there.
func runAgentChild(args []string) int {
	if len(args) != 1 && len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: eddasim __agent <duration|forever> [LEFT_PID_FILE]")
		return 2
	}
	if len(args) == 2 {
		exe, err := os.Executable()
		if err == nil {
			left := exec.Command(exe, agentChildArg, "forever")
			if err = left.Start(); err == nil {
				err = writeAtomic(args[1], []byte(strconv.Itoa(left.Process.Pid)+"\n"))
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "eddasim agent: leaving a process behind: %v\n", err)
			return 1
		}
	}
	if args[0] == "forever" {
		// Not `select {}`: with no other goroutine the runtime would report
		// a deadlock and exit.
		for {
			time.Sleep(time.Hour)
		}
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "eddasim agent: bad duration %q: %v\n", args[0], err)
		return 2
	}
	time.Sleep(d)
	return 0
}

// runAgent simulates one agent turn: it takes spec.Delay (or forever for
// hang), emits spec.Events progress events spread over that time, obeys the
// phase timeout (unless hang=forever) and SIGINT, then reports the outcome
// the directives ask for.
func (r *runner) runAgent(ph *Phase, spec simSpec, attempt int) agentResult {
	start := time.Now()
	var timeoutC <-chan time.Time
	if !spec.HangForever {
		t := time.NewTimer(time.Duration(agentTimeoutSec(ph)) * time.Second)
		defer t.Stop()
		timeoutC = t.C
	}

	var doneC <-chan error
	var child *exec.Cmd
	if spec.Child || spec.Orphan {
		var err error
		child, doneC, err = r.startChildAgent(ph.ID, spec)
		if err != nil {
			return agentResult{kind: agentCrash, error: "eddasim: agent child not started: " + err.Error()}
		}
	} else if !spec.Hang {
		ch := make(chan error, 1)
		time.AfterFunc(spec.Delay, func() { ch <- nil })
		doneC = ch
	}
	stopChild := func() {
		if child != nil {
			_ = child.Process.Kill()
			<-doneC
		}
	}

	// Progress events are spread evenly over the delay; a hanging agent
	// emits them all at once since it has no end to spread them to.
	emitted := 0
	var interval time.Duration
	if spec.Events > 0 && !spec.Hang && spec.Delay > 0 {
		interval = spec.Delay / time.Duration(spec.Events+1)
	}
	progress := time.NewTimer(interval)
	defer progress.Stop()
	progressC := progress.C
	if spec.Events == 0 {
		progressC = nil
	}

	for {
		select {
		case <-progressC:
			for emitted < spec.Events {
				emitted++
				r.log.record("agent_progress", evAgentProgress{PhaseID: ph.ID, N: emitted})
				if interval > 0 {
					break
				}
			}
			if emitted >= spec.Events {
				progressC = nil
			} else {
				progress.Reset(time.Until(start.Add(interval * time.Duration(emitted+1))))
			}
		case err := <-doneC:
			child = nil
			for emitted < spec.Events {
				emitted++
				r.log.record("agent_progress", evAgentProgress{PhaseID: ph.ID, N: emitted})
			}
			if err != nil {
				return agentResult{kind: agentCrash, error: "agent process exited: " + err.Error()}
			}
			return r.agentOutcome(spec, attempt)
		case <-timeoutC:
			stopChild()
			return agentResult{kind: agentTimeout}
		case <-r.ctx.Done():
			stopChild()
			return agentResult{kind: agentShutdown, error: "conductor shutdown"}
		}
	}
}

func (r *runner) agentOutcome(spec simSpec, attempt int) agentResult {
	switch {
	case spec.Timeout:
		return agentResult{kind: agentTimeout}
	case spec.Budget:
		return agentResult{kind: agentBudget, cost: spec.Cost}
	case spec.MaxTurns:
		return agentResult{kind: agentMaxTurns, cost: spec.Cost}
	case spec.crashesAt(attempt):
		msg := spec.Error
		if msg == "" {
			msg = fmt.Sprintf("eddasim: simulated agent crash (attempt %d)", attempt)
		}
		return agentResult{kind: agentCrash, error: msg}
	}
	return agentResult{kind: agentDone, cost: spec.Cost}
}

// startChildAgent runs the agent's wait in a child process, in the
// conductor's process group, and records its pid so tests can check that
// stopping the group stopped the agent too.
func (r *runner) startChildAgent(phaseID string, spec simSpec) (*exec.Cmd, <-chan error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("finding own executable: %w", err)
	}
	arg := spec.Delay.String()
	if spec.Hang {
		arg = "forever"
	}
	args := []string{agentChildArg, arg}
	if spec.Orphan {
		args = append(args, filepath.Join(stateDir(r.cwd, r.plan.Name), "left-"+phaseID+".pid"))
	}
	cmd := exec.Command(exe, args...)
	// edda discards its agent's standard error (Stderr nil: /dev/null).
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", exe, err)
	}
	pidFile := filepath.Join(stateDir(r.cwd, r.plan.Name), "agent-"+phaseID+".pid")
	if err := writeAtomic(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n")); err != nil {
		fmt.Fprintf(os.Stderr, "eddasim: %v\n", err)
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return cmd, ch, nil
}
