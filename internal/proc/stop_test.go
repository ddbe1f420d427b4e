package proc

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func stop(t *testing.T, h Handle, grace time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	if err := Stop(ctx, h, grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if GroupAlive(h.PGID) {
		t.Fatalf("group %d still alive after Stop returned", h.PGID)
	}
}

func TestStopKillsWholeGroupIncludingGrandchild(t *testing.T) {
	spec, _ := testSpec(t, "sh", "-c", "sleep 300 & sleep 300")
	h := mustStart(t, spec)
	// the foreground sleep (or the shell that will exec it) and the
	// background one, a grandchild of the supervisor
	awaitRunning(t, h.PGID, "sleep", 2)
	members, _ := groupMembers(h.PGID)
	if len(members) < 3 {
		t.Fatalf("group members %v, want supervisor and two sleeps", members)
	}

	stop(t, h, safety)
	for _, pid := range members {
		if st, err := readStat(pid); err == nil && st.running() {
			t.Errorf("member %d still running", pid)
		}
	}
	s, err := Inspect(h)
	if err != nil || s.Alive || !s.Exited || s.GroupAlive || s.ExitCode != -1 {
		t.Fatalf("after stop: %+v %v", s, err)
	}
	stop(t, h, safety) // idempotent
}

func TestStopEscalatesToKillAfterGrace(t *testing.T) {
	spec, _ := testSpec(t, "sh", "-c", `trap "" TERM; echo > ready; sleep 300`)
	h := mustStart(t, spec)
	eventually(t, "the TERM-proof conductor", func() bool { return fileExists(filepath.Join(spec.Dir, "ready")) })

	const grace = 200 * time.Millisecond
	t0 := time.Now()
	stop(t, h, grace)
	// Only SIGKILL can have ended it, and that comes after the grace.
	if d := time.Since(t0); d < grace {
		t.Fatalf("stopped after %v, before the grace period", d)
	}
}

func TestStopHonoursContext(t *testing.T) {
	spec, _ := testSpec(t, "sh", "-c", `trap "" TERM; echo > ready; sleep 300`)
	h := mustStart(t, spec)
	eventually(t, "the TERM-proof conductor", func() bool { return fileExists(filepath.Join(spec.Dir, "ready")) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Stop(ctx, h, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// Cancelling does not leave the run behind: it is killed at once.
	eventually(t, "the group to die", func() bool { return !GroupAlive(h.PGID) })
}

// foreign starts a process in its own group that is not ours to stop.
func foreign(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func TestPidReuseGuard(t *testing.T) {
	pid := foreign(t)
	st, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	stale := Handle{PID: pid, PGID: pid, StartTime: st.startTime + 1, Token: "not-this-run"}
	if s, err := Inspect(stale); err != nil || s.Alive || s.GroupAlive {
		t.Fatalf("stale handle inspected as %+v %v", s, err)
	}
	if err := Stop(context.Background(), stale, 0); err != nil {
		t.Fatalf("Stop on a recycled pid: %v", err)
	}
	if st2, err := readStat(pid); err != nil || !st2.running() || st2.startTime != st.startTime {
		t.Fatalf("foreign process was harmed: %+v %v", st2, err)
	}
	// Same process with the right start time is alive: the start time is
	// the only thing that made the difference above.
	good := Handle{PID: pid, PGID: pid, StartTime: st.startTime}
	if s, err := Inspect(good); err != nil || !s.Alive {
		t.Fatalf("matching handle inspected as %+v %v", s, err)
	}
}

func TestLeaderlessGroupIsStillStoppedByToken(t *testing.T) {
	// Killing only the supervisor leaves the conductor running in the
	// group; the token proves it is ours although the leader pid is gone.
	spec, _ := testSpec(t, "sleep", "300")
	h := mustStart(t, spec)
	awaitRunning(t, h.PGID, "sleep", 1)
	if err := syscall.Kill(h.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var s Status
	eventually(t, "the supervisor to die", func() bool {
		var err error
		s, err = Inspect(h)
		if err != nil {
			t.Fatal(err)
		}
		return s.Exited
	})
	if !s.GroupAlive || s.ExitCode != -1 {
		t.Fatalf("status = %+v, want orphaned group alive, exit unknown", s)
	}
	stop(t, h, safety)
}

func TestInvalidHandles(t *testing.T) {
	for _, h := range []Handle{{}, {PID: 1, PGID: 1}, {PID: 100, PGID: 0}, {PID: -5, PGID: -5}} {
		if _, err := Inspect(h); err == nil {
			t.Errorf("Inspect(%+v) accepted", h)
		}
		if err := Stop(context.Background(), h, 0); err == nil {
			t.Errorf("Stop(%+v) accepted", h)
		}
	}
	if GroupAlive(0) || GroupAlive(-1) || GroupAlive(1) {
		t.Error("GroupAlive answers for a special group id")
	}
}
