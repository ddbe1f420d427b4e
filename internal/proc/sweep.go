package proc

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// edda does not stop what its agents start: on a phase timeout it kills
// only its direct child (the agent), so the agent's own children live on,
// and when edda itself dies its agent lives on. Whatever a conductor left
// running when it ended is in its run's process group (or carries the
// run's token): Sweep ends it.

// Sweep ends what is left of a run whose supervisor is gone: SIGTERM to
// the group, up to grace, then SIGKILL, as Stop does. It returns how many
// processes it found left; 0, touching nothing, when the supervisor still
// runs (the conductor is alive: only Stop ends it) or nothing is left.
func Sweep(ctx context.Context, h Handle, grace time.Duration) (int, error) {
	if err := h.validate(); err != nil {
		return 0, fmt.Errorf("proc: sweep: %w", err)
	}
	alive, err := leaderAlive(h)
	if err != nil {
		return 0, fmt.Errorf("proc: sweep pid %d: %w", h.PID, err)
	}
	if alive {
		return 0, nil
	}
	members, err := ownedMembers(h)
	if err != nil {
		return 0, fmt.Errorf("proc: sweep group %d: %w", h.PGID, err)
	}
	if len(members) == 0 {
		return 0, nil
	}
	return len(members), Stop(ctx, h, grace)
}

// Interrupt asks the run's conductor to stop gracefully with SIGINT, the
// only signal edda handles: it kills its agent, records the phase as
// failed ("conductor shutdown"), puts it back to pending and exits 0, so a
// later `conduct run` of the plan continues it. (SIGTERM ends edda at once,
// leaving the agent running and the phase "running" for good.) The signal
// goes to the conductor alone, the supervisor's child, so the supervisor
// lives to record its exit status. A run that is gone is not an error.
func Interrupt(h Handle) error {
	if err := h.validate(); err != nil {
		return fmt.Errorf("proc: interrupt: %w", err)
	}
	alive, err := leaderAlive(h)
	if err != nil {
		return fmt.Errorf("proc: interrupt pid %d: %w", h.PID, err)
	}
	if !alive {
		return nil
	}
	members, err := groupMembers(h.PGID)
	if err != nil {
		return fmt.Errorf("proc: interrupt group %d: %w", h.PGID, err)
	}
	for _, pid := range members {
		st, err := readStat(pid)
		if err != nil || st.ppid != h.PID || pid == h.PID {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGINT); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("proc: send SIGINT to conductor %d: %w", pid, err)
		}
	}
	return nil
}
