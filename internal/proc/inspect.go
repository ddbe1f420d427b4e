package proc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Status is what Inspect learns about a run.
type Status struct {
	// Alive: the supervisor (pid and start time both matching, not a
	// zombie) is running, so the conductor is running or about to report
	// its exit.
	Alive bool
	// Exited is !Alive.
	Exited bool
	// ExitCode is the conductor's exit status once Exited: 128+n when it was
	// killed by signal n; -1 when unknown (the supervisor itself was killed,
	// e.g. by Stop, so it recorded nothing).
	ExitCode int
	// GroupAlive, set only when Exited, reports processes of the run still
	// running without their supervisor (it was killed alone, or an agent
	// left a background process). Stop them before trusting the outcome.
	GroupAlive bool
}

func (h Handle) validate() error {
	if h.PID <= 1 || h.PGID <= 1 {
		return fmt.Errorf("invalid handle: pid %d, pgid %d", h.PID, h.PGID)
	}
	return nil
}

// Inspect reports whether the run is alive and, once it is not, how it
// ended. It only reads /proc and the exit file, so any worker can call it.
func Inspect(h Handle) (Status, error) {
	if err := h.validate(); err != nil {
		return Status{ExitCode: -1}, fmt.Errorf("proc: inspect: %w", err)
	}
	alive, err := leaderAlive(h)
	if err != nil {
		return Status{ExitCode: -1}, fmt.Errorf("proc: inspect pid %d: %w", h.PID, err)
	}
	if alive {
		return Status{Alive: true, ExitCode: -1}, nil
	}
	s := Status{Exited: true, ExitCode: readExit(h.ExitPath)}
	members, err := ownedMembers(h)
	if err != nil {
		return s, fmt.Errorf("proc: inspect group %d: %w", h.PGID, err)
	}
	s.GroupAlive = len(members) > 0
	return s, nil
}

// readExit returns the recorded exit status, or -1. The supervisor writes
// the file by rename, so a present file is complete; anything unparsable is
// treated as unknown rather than failing every later Inspect.
func readExit(path string) int {
	if path == "" {
		return -1
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || code < 0 {
		return -1
	}
	return code
}

// leaderAlive: same pid, same start time, not a zombie.
func leaderAlive(h Handle) (bool, error) {
	if h.StartTime == 0 {
		return false, nil
	}
	st, err := readStat(h.PID)
	if errors.Is(err, errGone) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st.startTime == h.StartTime && st.running(), nil
}

// ownedMembers lists the running processes of h's group, but only if the
// group is provably h's: its leader is alive (a living leader pins the group
// id), or, with the leader gone, some member carries the run's token.
// Otherwise the id may have been recycled and nothing is reported.
func ownedMembers(h Handle) ([]int, error) {
	alive, err := leaderAlive(h)
	if err != nil {
		return nil, err
	}
	members, err := groupMembers(h.PGID)
	if err != nil || alive || len(members) == 0 {
		return members, err
	}
	if h.Token != "" {
		kv := TokenEnv + "=" + h.Token
		for _, pid := range members {
			if hasEnv(pid, kv) {
				return members, nil
			}
		}
	}
	return nil, nil
}

// GroupAlive reports whether any running (non-zombie) process is in process
// group pgid. It does not check whose group it is; Stop and Inspect do.
func GroupAlive(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	m, err := groupMembers(pgid)
	return err == nil && len(m) > 0
}

// Polling is the only way to learn that processes which are not our
// children have exited; this bounds the cost and the added latency.
const (
	gonePoll = 10 * time.Millisecond
	killWait = 10 * time.Second
)

// Stop ends the run: SIGTERM to its whole process group, up to grace for the
// group to exit, then SIGKILL to whatever remains. It returns nil once no
// process of the group runs, at once if none does (so it is idempotent), and
// never signals a group it cannot prove is the run's (see ownedMembers). If
// ctx ends during the grace period the group is killed at once and ctx's
// error returned; after SIGKILL it waits at most ctx or 10 s.
func Stop(ctx context.Context, h Handle, grace time.Duration) error {
	if err := h.validate(); err != nil {
		return fmt.Errorf("proc: stop: %w", err)
	}
	members, err := ownedMembers(h)
	if err != nil {
		return fmt.Errorf("proc: stop group %d: %w", h.PGID, err)
	}
	if len(members) == 0 {
		return nil
	}
	// From here on the group is known to be ours, and it stays ours while
	// it has members: a non-empty group's id cannot be handed out again.
	if err := signalGroup(h.PGID, syscall.SIGTERM); err != nil {
		return err
	}
	gone, werr := waitGone(ctx, h.PGID, grace)
	if gone {
		return nil
	}
	if err := signalGroup(h.PGID, syscall.SIGKILL); err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("proc: stop group %d: killed early: %w", h.PGID, werr)
	}
	kctx, cancel := context.WithTimeout(ctx, killWait)
	defer cancel()
	if gone, err := waitGone(kctx, h.PGID, killWait); !gone {
		if err == nil {
			err = errors.New("processes remain")
		}
		return fmt.Errorf("proc: stop group %d after SIGKILL: %w", h.PGID, err)
	}
	return nil
}

func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 { // -1 would signal every process we may signal
		return fmt.Errorf("proc: refusing to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("proc: send %s to group %d: %w", sig, pgid, err)
	}
	return nil
}

// waitGone polls until group pgid has no running member, for at most d or
// until ctx ends (then it returns ctx's error).
func waitGone(ctx context.Context, pgid int, d time.Duration) (bool, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(gonePoll)
	defer tick.Stop()
	for {
		members, err := groupMembers(pgid)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		if len(members) == 0 {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timer.C:
			return false, nil
		case <-tick.C:
		}
	}
}
