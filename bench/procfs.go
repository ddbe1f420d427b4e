package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// RSS returns a process's resident set size (VmRSS) in bytes.
func RSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("rss of pid %d: unexpected line %q", pid, line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("rss of pid %d: no VmRSS line", pid)
}

// CPUTime returns the user plus system CPU time a process has used.
func CPUTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu time of pid %d: %w", pid, err)
	}
	// The command name is in parentheses and may hold spaces: count fields
	// after its closing one (utime and stime are fields 14 and 15).
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("cpu time of pid %d: malformed stat", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu time of pid %d: short stat", pid)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu time of pid %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// FindPID returns the one process whose argument list satisfies match (the
// dev server, started by the SDK, whose pid is not exposed).
func FindPID(match func(args []string) bool) (int, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	found := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if !match(args) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		if found != 0 {
			return 0, fmt.Errorf("more than one process matches (pids %d and %d)", found, pid)
		}
		found = pid
	}
	if found == 0 {
		return 0, fmt.Errorf("no process matches")
	}
	return found, nil
}
