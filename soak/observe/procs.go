package observe

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/soak"
)

// Root is one worker host's work root.
type Root struct {
	Host string
	Dir  string
}

// Run is one conductor run recorded under a work root: the record the
// bridge writes at runs/<task>/<dir>/handle.json.
type Run struct {
	Host   string
	Task   string
	Dir    string
	Handle proc.Handle
}

// runIndex lists the conductor runs of work roots and keeps their records:
// a run's handle.json is written once, so it is read once.
type runIndex struct {
	mu      sync.Mutex
	handles map[string]proc.Handle // by handle.json path
}

func newRunIndex() *runIndex { return &runIndex{handles: map[string]proc.Handle{}} }

// runs lists the recorded runs under roots. A run directory without a
// record yet (its conductor is being started) is left for a later call.
func (x *runIndex) runs(roots []Root) ([]Run, error) {
	var out []Run
	for _, r := range roots {
		paths, err := filepath.Glob(filepath.Join(r.Dir, "runs", "*", "*", "handle.json"))
		if err != nil {
			return nil, fmt.Errorf("list runs under %s: %w", r.Dir, err)
		}
		for _, p := range paths {
			h, ok, err := x.handle(p)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			dir := filepath.Dir(p)
			out = append(out, Run{Host: r.Host, Task: filepath.Base(filepath.Dir(dir)), Dir: filepath.Base(dir), Handle: h})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Task != out[j].Task {
			return out[i].Task < out[j].Task
		}
		return out[i].Dir < out[j].Dir
	})
	return out, nil
}

func (x *runIndex) handle(path string) (proc.Handle, bool, error) {
	x.mu.Lock()
	h, ok := x.handles[path]
	x.mu.Unlock()
	if ok {
		return h, true, nil
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("read run record: %w", err)
	}
	if err := json.Unmarshal(data, &h); err != nil {
		// Written by rename, so a partial file is not expected; a bad one
		// is reported rather than taken for a dead run.
		return h, false, fmt.Errorf("run record %s: %w", path, err)
	}
	x.mu.Lock()
	x.handles[path] = h
	x.mu.Unlock()
	return h, true, nil
}

// Runs lists the conductor runs recorded under the work roots.
func Runs(roots ...Root) ([]Run, error) { return newRunIndex().runs(roots) }

// liveConductors matches runs against one snapshot of the process table:
// a run is live while any running process is in its process group.
func liveConductors(runs []Run, ps []proc.Process) []soak.LiveConductor {
	groups := make(map[int]bool, len(ps))
	for _, p := range ps {
		groups[p.PGID] = true
	}
	byPID := processesByPID(ps)
	var out []soak.LiveConductor
	for _, r := range runs {
		if r.Handle.PGID > 1 && groups[r.Handle.PGID] && !groupReused(r.Handle, byPID) {
			out = append(out, soak.LiveConductor{Host: r.Host, Task: r.Task, Dir: r.Dir, PGID: r.Handle.PGID})
		}
	}
	return out
}

func processesByPID(ps []proc.Process) map[int]proc.Process {
	m := make(map[int]proc.Process, len(ps))
	for _, p := range ps {
		m[p.PID] = p
	}
	return m
}

// groupReused reports whether a run's process group number now belongs to
// another group: its leader's pid runs a process other than the one the
// record names (another start time). Linux hands out a group's number
// again only once the group is empty, and a new group is led by the
// process whose pid it is; so a soak that starts thousands of processes
// does not take a stranger's group for a conductor that ended long ago.
// A record without a start time (the leader was gone when it was written)
// is judged by its group alone.
func groupReused(h proc.Handle, byPID map[int]proc.Process) bool {
	leader, ok := byPID[h.PGID]
	return ok && h.StartTime != 0 && leader.StartTime != h.StartTime
}

// LiveConductors lists the runs under the work roots whose process group
// has a running member, from one pass over /proc.
func LiveConductors(roots ...Root) ([]soak.LiveConductor, error) {
	runs, err := Runs(roots...)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	ps, err := proc.Processes()
	if err != nil {
		return nil, err
	}
	return liveConductors(runs, ps), nil
}

// Started is a process the driver started (a worker, the dev server), for
// the end's check that it is gone.
type Started struct {
	PID  int
	What string
	Host string
	Cmd  string
}

// Leftovers lists what still runs of a soak once its driver stopped
// everything: every process in a conductor run's group or carrying a
// run's token (an agent that left the group), and every process the
// driver says it started.
func Leftovers(roots []Root, started []Started) ([]soak.Process, error) {
	runs, err := Runs(roots...)
	if err != nil {
		return nil, err
	}
	ps, err := proc.Processes()
	if err != nil {
		return nil, err
	}
	byPID := processesByPID(ps)
	byGroup := map[int]Run{}
	tokens := map[string]Run{}
	for _, r := range runs {
		if r.Handle.PGID > 1 && !groupReused(r.Handle, byPID) {
			byGroup[r.Handle.PGID] = r
		}
		if r.Handle.Token != "" {
			tokens[proc.TokenEnv+"="+r.Handle.Token] = r
		}
	}
	self := os.Getpid()
	var out []soak.Process
	seen := map[int]bool{}
	for _, p := range ps {
		if p.PID == self {
			continue
		}
		r, inGroup := byGroup[p.PGID]
		if !inGroup {
			for kv, tr := range tokens {
				if proc.HasEnv(p.PID, kv) {
					r, inGroup = tr, true
					break
				}
			}
		}
		if !inGroup {
			continue
		}
		what := "agent"
		if p.PID == r.Handle.PID {
			what = "conductor"
		}
		seen[p.PID] = true
		out = append(out, soak.Process{PID: p.PID, PGID: p.PGID, What: what, Host: r.Host, Task: r.Task, Dir: r.Dir, Cmd: cmdline(p.PID)})
	}
	running := map[int]proc.Process{}
	for _, p := range ps {
		running[p.PID] = p
	}
	for _, s := range started {
		p, ok := running[s.PID]
		if !ok || seen[s.PID] || s.PID == self {
			continue
		}
		cmd := s.Cmd
		if cmd == "" {
			cmd = cmdline(s.PID)
		}
		out = append(out, soak.Process{PID: s.PID, PGID: p.PGID, What: s.What, Host: s.Host, Cmd: cmd})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// cmdline is a process's command line, space-joined and cut to a line.
func cmdline(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	for i, b := range data {
		if b == 0 {
			data[i] = ' '
		}
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
