package proc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A conductor that exits leaving its agent's child behind (edda kills only
// its direct child on a timeout, and nothing when it dies itself): Sweep
// ends what is left of the group and says how many it swept.
func TestSweepEndsWhatAGoneConductorLeft(t *testing.T) {
	spec, _ := testSpec(t, "sh", "-c", "sleep 300 & echo > ready; exit 0")
	h := mustStart(t, spec)
	eventually(t, "the conductor to exit", func() bool {
		s, err := Inspect(h)
		return err == nil && s.Exited && fileExists(filepath.Join(spec.Dir, "ready"))
	})
	s, _ := Inspect(h)
	if !s.GroupAlive || s.ExitCode != 0 {
		t.Fatalf("status %+v, want exited 0 with a process left", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	n, err := Sweep(ctx, h, safety)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 process swept", n, err)
	}
	if GroupAlive(h.PGID) {
		t.Fatal("group still alive after the sweep")
	}
	if n, err := Sweep(ctx, h, safety); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want nothing to sweep", n, err)
	}
}

// Sweep leaves a run whose conductor still runs alone: only Stop ends one.
func TestSweepLeavesALiveConductor(t *testing.T) {
	spec, _ := testSpec(t, "sleep", "300")
	h := mustStart(t, spec)
	awaitRunning(t, h.PGID, "sleep", 1)
	n, err := Sweep(context.Background(), h, 0)
	if err != nil || n != 0 {
		t.Fatalf("Sweep = %d, %v; want 0", n, err)
	}
	if s, _ := Inspect(h); !s.Alive {
		t.Fatal("the live conductor was stopped")
	}
	stop(t, h, safety)
}

// Interrupt sends SIGINT to the conductor alone (edda's graceful stop:
// it ends its agent itself, puts the phase back and exits 0), not to the
// supervisor, which then records the conductor's own exit status.
func TestInterruptReachesTheConductorOnly(t *testing.T) {
	spec, _ := testSpec(t, "sh", "-c", `trap 'echo got > int; exit 0' INT; echo > ready; while :; do sleep 0.05; done`)
	h := mustStart(t, spec)
	eventually(t, "the conductor", func() bool { return fileExists(filepath.Join(spec.Dir, "ready")) })
	if err := Interrupt(h); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	var s Status
	eventually(t, "the conductor to exit", func() bool {
		s, _ = Inspect(h)
		return s.Exited
	})
	if s.ExitCode != 0 {
		t.Fatalf("exit code %d, want the conductor's own 0", s.ExitCode)
	}
	data, _ := os.ReadFile(filepath.Join(spec.Dir, "int"))
	if strings.TrimSpace(string(data)) != "got" {
		t.Fatalf("the conductor did not see SIGINT")
	}
	if err := Interrupt(h); err != nil {
		t.Fatalf("Interrupt of a gone run: %v", err)
	}
}
