//go:build realserver

package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// edda kills only its direct child on a phase timeout, and nothing when
// it dies itself: an agent's children, or the agent, live on. Whatever a
// conductor left is swept when the runtime sees it gone, so no process of
// the attempt is left, and the brief says so.

// leftPID waits for the pid of the process the `orphan` agent of phase
// leaves behind.
func leftPID(t *testing.T, r *rig, taskID, plan, phase string) int {
	t.Helper()
	path := filepath.Join(filepath.Dir(r.EventsPath(taskID, plan)), "left-"+phase+".pid")
	var pid int
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && pid > 0
	}, 30*time.Second, 20*time.Millisecond, "no %s", path)
	return pid
}

func requireGone(t *testing.T, pid int) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// A zombie (state Z) runs nothing: it only waits to be reaped.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		require.Equal(t, "Z", f[0], "process %d left by the agent still runs", pid)
	}
}

func requireSweepNote(t *testing.T, r *rig, taskID string) {
	t.Helper()
	require.Contains(t, string(r.FileBriefRaw(taskID)), "process(es) running in its process group")
}

// The agent leaves a process behind and its phase times out: the plan is
// blocked, the conductor exits 0, and the process is swept.
func TestTimedOutAgentLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	r := newRig(t, testrig.Options{})
	r.Workspace("SW1")
	run := r.Start(testrig.Dispatch(t, "SW1", "Leaves a build running. [sim phase=implement orphan timeout]"))
	s := r.WaitPhase("SW1", "implement")
	pid := leftPID(t, r, "SW1", s.PlanName, "implement")
	res := r.Result(run)
	requireBlocked(t, r, "SW1", res)
	requireGone(t, pid)
	r.AssertNoOrphans()
	assertNoConductorGroups(t, r)
	requireSweepNote(t, r, "SW1")
}

// The conductor alone is SIGKILLed mid-phase: its agent (and what the
// agent started) live on until the runtime, seeing the conductor gone,
// sweeps them.
func TestKilledConductorLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	r := newRig(t, testrig.Options{})
	r.Workspace("SW2")
	run := r.Start(testrig.Dispatch(t, "SW2", "Killed mid-phase. [sim phase=implement orphan hang=forever]"))
	s := r.WaitPhase("SW2", "implement")
	pid := leftPID(t, r, "SW2", s.PlanName, "implement")
	h := conductorHandle(t, r, "SW2", s.PlanName)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", h.PID, h.PID))
	require.NoError(t, err)
	conductor, err := strconv.Atoi(strings.Fields(string(data))[0])
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(conductor, syscall.SIGKILL))

	res := r.Result(run)
	requireBlocked(t, r, "SW2", res)
	requireGone(t, pid)
	r.AssertNoOrphans()
	assertNoConductorGroups(t, r)
	requireSweepNote(t, r, "SW2")
}

// A conductor the runtime stops of its own accord ends its task saying
// so. Two workers on one machine and work root under two host names (a
// misconfiguration docs/fleet.md warns of) see each other's conductors:
// h2's fence stops the conductor h1 runs, since the task's workflow runs
// that attempt on h1. The task ends blocked by the fence, with its reason,
// in the outcome, karvi's status and the brief, not as a crash.
func TestATaskWhoseConductorTheFenceStoppedSaysSo(t *testing.T) {
	t.Parallel()
	r := newRig(t, testrig.Options{WorkerArgs: []string{"-host", "h1"}})
	r.Workspace("SW3")
	run := r.Start(testrig.Dispatch(t, "SW3", "Runs on h1. [sim phase=test hang=forever]"))
	s := r.WaitFor("SW3", "the attempt running on h1", func(s taskapi.Status) bool {
		return s.Stage == taskapi.StageRunning && s.Host == "h1"
	})
	r.WaitPhase("SW3", "test")

	o := r.Worker().Opts
	o.Args = append(slices.Clone(o.Args), "-host", "h2")
	o.LogPath = filepath.Join(r.Dir, "worker-h2.log")
	h2, err := devenv.StartWorker(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h2.Stop() })

	res := r.Result(run)
	requireBlocked(t, r, "SW3", res)
	want := "The worker's fence on host h2 stopped the conductor while phase test was running: " +
		"the task's workflow runs this attempt on host h1"
	require.Equal(t, want, res.Outcome.LastError)
	require.Equal(t, want, res.Outcome.BlockerReason)
	require.Equal(t, mapping.ErrFenced, res.Outcome.ErrorType)
	brief := r.FileBrief("SW3")
	phases, _ := brief["phases"].(map[string]any)
	test, _ := phases["test"].(map[string]any)
	require.Equal(t, "failed", test["status"])
	require.Equal(t, want, test["error"])
	require.Contains(t, string(r.FileBriefRaw("SW3")), "the worker's fence on host h2 stopped the conductor of "+s.PlanName+
		": the task's workflow runs this attempt on host h1")
	r.AssertNoOrphans()
	assertNoConductorGroups(t, r)
}
