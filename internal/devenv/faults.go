package devenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"karvi-edda-temporal/internal/proc"
)

// LiveConductors returns the runs under a work root that still have a
// running process: the supervisor itself, or any member of its group. The
// fault suite samples it to prove that a task never has two conductors.
func LiveConductors(workRoot string) ([]proc.Handle, error) {
	hs, err := Handles(workRoot)
	if err != nil {
		return nil, err
	}
	var live []proc.Handle
	for _, h := range hs {
		st, err := proc.Inspect(h)
		if err != nil {
			return nil, fmt.Errorf("inspect run of pid %d: %w", h.PID, err)
		}
		if st.Alive || st.GroupAlive {
			live = append(live, h)
		}
	}
	return live, nil
}

// RunProcesses returns the pids of running processes that carry the run
// token of any run under a work root, whatever group or session they moved
// to. After every workflow has ended it must be empty: anything it finds is
// an orphan the bridge left behind.
func RunProcesses(workRoot string) ([]int, error) {
	hs, err := Handles(workRoot)
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
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || !running(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if tokens[string(kv)] {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

// running: the process exists and is not a zombie (a zombie runs nothing;
// in a container whose init does not reap, orphans' zombies linger).
func running(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command, which may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(data[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// LiveRunsByTask counts, per task id, the runs under a work root whose
// process group has a running member, from one scan of /proc: cheap enough
// to sample every few milliseconds while a test storms a task. A task with
// two live runs had two conductors at once.
func LiveRunsByTask(workRoot string) (map[string]int, error) {
	paths, err := filepath.Glob(filepath.Join(workRoot, "runs", "*", "*", "handle.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return map[string]int{}, nil
	}
	groups, err := liveGroups()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var h proc.Handle
		if err := json.Unmarshal(data, &h); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		task := filepath.Base(filepath.Dir(filepath.Dir(p)))
		if groups[h.PGID] {
			out[task]++
		}
	}
	return out, nil
}

// liveGroups is the set of process groups with a running member.
func liveGroups() (map[int]bool, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	out := map[int]bool{}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		// After the command: state, ppid, pgrp.
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if pgrp, err := strconv.Atoi(f[2]); err == nil {
			out[pgrp] = true
		}
	}
	return out, nil
}
