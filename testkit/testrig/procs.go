//go:build realserver

package testrig

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/testkit/devenv"
)

// What runs on the machine, read from /proc: the bridge's promise is one
// conductor per attempt and nothing left behind, and these are its checks.

// LiveConductors are the runs under the work root that still have a
// running process: the supervisor itself, or any member of its group.
func (r *Rig) LiveConductors() []proc.Handle {
	r.t.Helper()
	hs, err := devenv.Handles(r.WorkRoot)
	require.NoError(r.t, err)
	var live []proc.Handle
	for _, h := range hs {
		st, err := proc.Inspect(h)
		require.NoError(r.t, err, "inspect run of pid %d", h.PID)
		if st.Alive || st.GroupAlive {
			live = append(live, h)
		}
	}
	return live
}

// AssertNoOrphans fails unless every conductor run under the work root is
// gone: supervisor, group, and any process carrying a run's token.
func (r *Rig) AssertNoOrphans() {
	r.t.Helper()
	require.Empty(r.t, r.LiveConductors(), "conductor runs still alive")
	left, err := RunProcesses(r.WorkRoot)
	require.NoError(r.t, err)
	require.Empty(r.t, left, "processes of finished runs still running")
}

// RunProcesses returns the pids of running processes that carry the run
// token of any run under a work root, whatever group or session they moved
// to. After every workflow has ended it must be empty: anything it finds is
// an orphan the bridge left behind.
func RunProcesses(workRoot string) ([]int, error) {
	hs, err := devenv.Handles(workRoot)
	if err != nil {
		return nil, err
	}
	tokens := map[string]bool{}
	for _, h := range hs {
		if h.Token != "" {
			tokens[proc.TokenEnv+"="+h.Token] = true
		}
	}
	if len(tokens) == 0 {
		return nil, nil
	}
	ps, err := runningProcesses()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, p := range ps {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ")
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if tokens[string(kv)] {
				out = append(out, p.pid)
				break
			}
		}
	}
	return out, nil
}

// GroupProcesses lists the running processes of a process group (the
// conductor's: supervisor, conductor, agents).
func GroupProcesses(t testing.TB, pgid int) []int {
	t.Helper()
	ps, err := runningProcesses()
	require.NoError(t, err)
	var pids []int
	for _, p := range ps {
		if p.pgrp == pgid {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// LiveRunsByTask counts, per task id, the runs under a work root whose
// process group has a running member, from one scan of /proc: cheap enough
// to sample every few milliseconds while a test storms a task. A task with
// two live runs had two conductors at once.
func LiveRunsByTask(workRoot string) (map[string]int, error) {
	runs, err := devenv.Runs(workRoot)
	if err != nil || len(runs) == 0 {
		return map[string]int{}, err
	}
	ps, err := runningProcesses()
	if err != nil {
		return nil, err
	}
	groups := map[int]bool{}
	for _, p := range ps {
		groups[p.pgrp] = true
	}
	out := map[string]int{}
	for _, run := range runs {
		if groups[run.Handle.PGID] {
			out[run.TaskID]++
		}
	}
	return out, nil
}

// process is one running process as /proc/<pid>/stat shows it.
type process struct{ pid, pgrp int }

// runningProcesses lists the processes that exist and are not zombies (a
// zombie runs nothing; in a container whose init does not reap, orphans'
// zombies linger).
func runningProcesses() ([]process, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// After the parenthesised command, which may hold spaces: state,
		// ppid, pgrp.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if pgrp, err := strconv.Atoi(f[2]); err == nil {
			out = append(out, process{pid: pid, pgrp: pgrp})
		}
	}
	return out, nil
}

// ConductorSampler watches the process table while a test runs and keeps,
// per task, the most conductor runs it ever saw alive at once, and the most
// of all tasks together.
type ConductorSampler struct {
	stop, done chan struct{}
	max        map[string]int
	most       int
	samples    int
	err        error
}

// SampleConductors samples the live runs under the work root every 20 ms
// until Stop.
func (r *Rig) SampleConductors() *ConductorSampler {
	s := &ConductorSampler{stop: make(chan struct{}), done: make(chan struct{}), max: map[string]int{}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			live, err := LiveRunsByTask(r.WorkRoot)
			if err != nil {
				s.err = err
				return
			}
			s.samples++
			all := 0
			for task, n := range live {
				s.max[task] = max(s.max[task], n)
				all += n
			}
			s.most = max(s.most, all)
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and asserts that no task ever had two live
// conductor runs; it returns the number of samples taken.
func (s *ConductorSampler) Stop(t testing.TB) int {
	t.Helper()
	close(s.stop)
	<-s.done
	require.NoError(t, s.err, "sampling the process table")
	require.NotZero(t, s.samples)
	for task, n := range s.max {
		require.LessOrEqual(t, n, 1, "task %s had %d live conductors at once", task, n)
	}
	return s.samples
}

// Most is the most conductors of all tasks seen alive at once; call it
// after Stop.
func (s *ConductorSampler) Most() int {
	return s.most
}
