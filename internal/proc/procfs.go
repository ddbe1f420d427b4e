package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procStat is what this package needs from /proc/<pid>/stat.
type procStat struct {
	state     byte // R, S, D, Z, X, ...
	ppid      int
	pgrp      int
	session   int
	startTime uint64 // clock ticks after boot; unique per pid lifetime
}

// errGone marks a pid with no process behind it (or one that vanished while
// being read).
var errGone = errors.New("no such process")

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return procStat{}, errGone
		}
		return procStat{}, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
	}
	return parseStat(data)
}

// parseStat parses the fields after the command name, which is enclosed in
// parentheses and may itself contain spaces and ')': hence the last ')'.
func parseStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 > len(data) {
		return procStat{}, fmt.Errorf("malformed /proc stat line %q", data)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); field N is f[N-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed /proc stat line %q", data)
	}
	ppid, err0 := strconv.Atoi(f[1])
	pgrp, err1 := strconv.Atoi(f[2])
	session, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err0, err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat line %q: %w", data, err)
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, session: session, startTime: start}, nil
}

func (s procStat) running() bool { return s.state != 'Z' && s.state != 'X' }

// pids lists the numeric entries of /proc.
func pids() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// groupMembers returns the live (non-zombie) processes whose process group is
// pgid. Zombies are excluded: they run nothing, and in a container whose
// init does not reap, orphans' zombies would otherwise linger forever.
func groupMembers(pgid int) ([]int, error) {
	all, err := pids()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pid := range all {
		st, err := readStat(pid)
		if err != nil {
			continue // vanished while scanning, or unreadable: not ours to judge
		}
		if st.pgrp == pgid && st.running() {
			out = append(out, pid)
		}
	}
	return out, nil
}

// hasEnv reports whether the process's initial environment holds kv exactly.
func hasEnv(pid int, kv string) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for e := range bytes.SplitSeq(data, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}
