package proc

// Process is one running process as /proc/<pid>/stat shows it.
type Process struct {
	PID       int
	PPID      int
	PGID      int
	Session   int
	StartTime uint64
}

// Processes lists the running processes from one pass over /proc: zombies
// are left out (they run nothing), and so are processes that vanish or
// cannot be read while the pass runs. Callers that watch many runs take
// one snapshot and match groups against it, instead of scanning /proc once
// per run.
func Processes() ([]Process, error) {
	all, err := pids()
	if err != nil {
		return nil, err
	}
	out := make([]Process, 0, len(all))
	for _, pid := range all {
		st, err := readStat(pid)
		if err != nil || !st.running() {
			continue
		}
		out = append(out, Process{PID: pid, PPID: st.ppid, PGID: st.pgrp, Session: st.session, StartTime: st.startTime})
	}
	return out, nil
}

// HasEnv reports whether the process's initial environment holds kv
// ("NAME=value") exactly; false when it cannot be read.
func HasEnv(pid int, kv string) bool { return hasEnv(pid, kv) }

// Alive reports whether h's supervisor is still the same running process
// (pid and start time match).
func Alive(h Handle) bool {
	if h.validate() != nil {
		return false
	}
	ok, err := leaderAlive(h)
	return err == nil && ok
}
