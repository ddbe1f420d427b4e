//go:build realserver

package faults

// Conductor faults. Each test breaks the conductor in one way and asserts
// the end state: the status mapping of the karvi<->edda contract
// (docs/contract.md: blocked unless the conductor's own truth says
// otherwise), a lastError that names the phase or the cause, the same
// status in the sink, and no process of any run left behind.
//
// Where a fault must land at a precise point, the conductor's process group
// is frozen with SIGSTOP (so it can write nothing), the test awaits the
// workflow having consumed everything on disk, tampers, and thaws it with
// SIGCONT: no step depends on how fast anything runs.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// conductorHandle reads the run record of a task's plan.
func conductorHandle(t *testing.T, r *rig, taskID, plan string) proc.Handle {
	t.Helper()
	h, err := devenv.ReadHandle(r.WorkRoot, taskID, plan)
	require.NoError(t, err)
	require.Greater(t, h.PGID, 1)
	return h
}

// freezeConductor stops every process of the run's group; thawConductor
// resumes them. Cleanup thaws in any case, so a failed test does not leave a
// stopped group for the rig's cleanup to wait on.
func freezeConductor(t *testing.T, h proc.Handle) {
	t.Helper()
	require.NoError(t, syscall.Kill(-h.PGID, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(-h.PGID, syscall.SIGCONT) })
}

func thawConductor(t *testing.T, h proc.Handle) {
	t.Helper()
	require.NoError(t, syscall.Kill(-h.PGID, syscall.SIGCONT))
}

// awaitConductorExit polls /proc until the run's supervisor is gone; the
// deadline is a safety net only.
func awaitConductorExit(t *testing.T, h proc.Handle) {
	t.Helper()
	wait.EventuallyEvery(t, 2*time.Minute, 20*time.Millisecond, fmt.Sprintf("conductor pid %d to exit", h.PID), func() (any, bool) {
		st, err := proc.Inspect(h)
		require.NoError(t, err)
		return st, !st.Alive
	})
}

// countLines counts the complete lines of a file.
func countLines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Count(string(data), "\n")
}

// awaitConsumed waits until the workflow has applied every event the
// (frozen) conductor wrote: nothing on disk is left unread when the test
// tampers with the log.
func awaitConsumed(r *rig, taskID, events string) taskapi.Status {
	n := countLines(r.T(), events)
	return r.WaitFor(taskID, "all events on disk applied", func(s taskapi.Status) bool {
		return s.EventsApplied == n
	})
}

// assertNoConductorGroups is the brief's orphan rule, checked literally: no
// process group of any run under the work root has a running member.
func assertNoConductorGroups(t *testing.T, r *rig) {
	t.Helper()
	hs, err := devenv.Handles(r.WorkRoot)
	require.NoError(t, err)
	require.NotEmpty(t, hs, "the test started no conductor")
	for _, h := range hs {
		require.False(t, proc.GroupAlive(h.PGID), "group %d of %s still has a process", h.PGID, h.LogPath)
	}
	r.AssertNoOrphans()
}

// requireBlocked asserts the contract's blocked mapping in the result and in
// the sink, and returns lastError.
func requireBlocked(t *testing.T, r *rig, taskID string, res taskapi.Result) string {
	t.Helper()
	o := res.Outcome
	require.EqualValues(t, "blocked", o.TaskStatus, "outcome %+v", o)
	require.EqualValues(t, "failed", o.DispatchState, "outcome %+v", o)
	require.Equal(t, 1, o.Code)
	require.NotEmpty(t, o.LastError)
	t.Logf("task %s blocked: lastError %q", taskID, o.LastError)
	st := r.FileStatus(taskID)
	require.Equal(t, "blocked", st["status"])
	blocker, _ := st["blocker"].(map[string]any)
	require.Equal(t, o.BlockerReason, blocker["reason"])
	disp, _ := st["dispatch"].(map[string]any)
	require.Equal(t, "failed", disp["state"])
	require.Equal(t, o.LastError, disp["lastError"])
	return o.LastError
}

// A conductor that crashes mid-phase: exit 3 right after phase_start, no
// terminal event, state.json still "running".
func TestConductorCrash(t *testing.T) {
	t.Parallel()
	r := newRig(t, testrig.Options{})
	r.Workspace("CC1")
	res := r.Result(r.Start(testrig.Dispatch(t, "CC1", "Crash in the test phase. [sim phase=test die]")))
	last := requireBlocked(t, r, "CC1", res)
	require.Equal(t, mapping.ErrAgentCrash, res.Outcome.ErrorType)
	require.True(t, strings.HasPrefix(last,
		"Conductor crashed: conductor exited while phase test was running, leaving the plan running"), last)
	require.True(t, strings.HasSuffix(last, "(exit code 3)"), last)
	assertNoConductorGroups(t, r)
}

// A conductor that exits 0 without a terminal event after a phase exhausted
// its attempts: state.json says blocked, and its phase error is the truth.
func TestConductorExitZeroBlocked(t *testing.T) {
	t.Parallel()
	r := newRig(t, testrig.Options{})
	r.Workspace("CC2")
	res := r.Result(r.Start(testrig.Dispatch(t, "CC2",
		`Tests never pass. [sim phase=test fail=always error="3 tests failed in auth::jwt"]`)))
	last := requireBlocked(t, r, "CC2", res)
	require.Equal(t, "Phase test failed after 3 attempts: check failed: 3 tests failed in auth::jwt", last)
	require.Equal(t, "Phase test failed: 3 tests failed in auth::jwt", res.Outcome.BlockerReason)
	for _, ev := range r.Events("CC2", res.PlanName) {
		require.NotContains(t, []any{"plan_completed", "plan_aborted"}, ev["type"])
	}
	assertNoConductorGroups(t, r)
}

// A conductor that hangs: alive and silent past timeout_sec plus the grace.
// The workflow stops its group and blocks the task "Phase test timed out".
func TestConductorHang(t *testing.T) {
	t.Parallel()
	r := newRig(t, testrig.Options{})
	r.Workspace("CC3")
	d := testrig.Dispatch(t, "CC3", "Hangs in the test phase. [sim phase=test hang=forever]")
	// Silent for 3 s + 2 s is a hang; the phases before write within
	// milliseconds, so only the hung phase can trip it.
	timeout := 3
	d.TimeoutSec = &timeout
	run := r.StartInput(taskapi.TaskInput{Dispatch: d,
		Tuning: &taskapi.Tuning{SilenceGrace: 2 * time.Second}})
	s := r.WaitPhase("CC3", "test")
	h := conductorHandle(t, r, "CC3", s.PlanName)
	res := r.Result(run)
	last := requireBlocked(t, r, "CC3", res)
	require.Equal(t, "Phase test timed out", last)
	require.Equal(t, mapping.ErrTimeout, res.Outcome.ErrorType)
	require.False(t, proc.GroupAlive(h.PGID), "the hung conductor's group was stopped")
	assertNoConductorGroups(t, r)
}

// A conductor that writes plan_completed and then does not exit: the
// task completes as its events say, and its workflow ends only once the
// conductor is gone (stopped after the delivery's wait for its exit), so
// nothing of the attempt outlives the task.
func TestConductorLingeringAfterItsPlanIsStopped(t *testing.T) {
	t.Parallel()
	r := newRig(t, testrig.Options{})
	r.Workspace("CC10")
	res := r.Result(r.Start(testrig.Dispatch(t, "CC10", "Lingers. "+testrig.ExampleCosts+" [sim linger=1h]")))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, testrig.ExampleBriefFor(t, "CC10", res.PlanName), r.FileBrief("CC10"))
	assertNoConductorGroups(t, r)
}

// A conductor killed from outside (SIGKILL to its whole group, supervisor
// included, so not even its exit status is recorded).
func TestConductorKilledFromOutside(t *testing.T) {
	t.Parallel()
	r := newRig(t, testrig.Options{})
	r.Workspace("CC4")
	run := r.Start(testrig.Dispatch(t, "CC4", "Killed in the test phase. [sim phase=test hang=forever]"))
	s := r.WaitPhase("CC4", "test")
	h := conductorHandle(t, r, "CC4", s.PlanName)
	require.NoError(t, syscall.Kill(-h.PGID, syscall.SIGKILL))
	res := r.Result(run)
	last := requireBlocked(t, r, "CC4", res)
	require.Equal(t, mapping.ErrAgentCrash, res.Outcome.ErrorType)
	require.True(t, strings.HasPrefix(last,
		"Conductor crashed: conductor was killed (no exit status was recorded) while phase test was running, leaving the plan running"), last)
	require.NotContains(t, last, "exit code", "an unknown exit status is not printed as a number")
	assertNoConductorGroups(t, r)
}

// logTamperRun runs example A whose test phase takes a second, and tampers
// with events.jsonl at a settled point: the conductor is in the test phase,
// its group frozen, and the workflow has applied every event on disk
// (consumed is its status then). It thaws the conductor after tamper and
// returns the workflow's result.
func logTamperRun(t *testing.T, taskID, message string, tamper func(r *rig, events string, consumed taskapi.Status)) (*rig, taskapi.Result) {
	t.Helper()
	r := newRig(t, testrig.Options{})
	r.Workspace(taskID)
	run := r.Start(testrig.Dispatch(t, taskID, message+" "+testrig.ExampleCosts+" [sim phase=test delay=1s]"))
	s := r.WaitPhase(taskID, "test")
	h := conductorHandle(t, r, taskID, s.PlanName)
	events := r.EventsPath(taskID, s.PlanName)

	freezeConductor(t, h)
	tamper(r, events, awaitConsumed(r, taskID, events))
	thawConductor(t, h)
	return r, r.Result(run)
}

// events.jsonl deleted while the workflow tails it. The conductor keeps
// running and recreates the log with its next event; every event reached
// the workflow (those before the deletion had been consumed), so the run
// completes with the undisturbed brief.
func TestEventLogDeletedWhileTailing(t *testing.T) {
	t.Parallel()
	r, res := logTamperRun(t, "CC5", "Log deleted.", func(_ *rig, events string, _ taskapi.Status) {
		require.NoError(t, os.Remove(events))
	})
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, testrig.ExampleBriefFor(t, "CC5", res.PlanName), r.FileBrief("CC5"))
	require.Len(t, res.Brief.Log, 8, "every event once")
	require.Equal(t, "completed", r.FileStatus("CC5")["status"])
	st, err := r.Status("CC5")
	require.NoError(t, err)
	require.Zero(t, st.Malformed)
	assertNoConductorGroups(t, r)
}

// events.jsonl truncated to nothing while tailing: the new content is read
// from its start, nothing lost, nothing doubled.
func TestEventLogTruncatedWhileTailing(t *testing.T) {
	t.Parallel()
	r, res := logTamperRun(t, "CC6", "Log truncated.", func(_ *rig, events string, _ taskapi.Status) {
		require.NoError(t, os.Truncate(events, 0))
	})
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Equal(t, testrig.ExampleBriefFor(t, "CC6", res.PlanName), r.FileBrief("CC6"))
	require.Len(t, res.Brief.Log, 8, "every event once")
	assertNoConductorGroups(t, r)
}

// events.jsonl cut in the middle of a line while tailing. The reader cannot
// tell a rewritten log from a new one, so it reads the surviving prefix
// again (a new generation); the torn line and the next event the conductor
// appends become one malformed line, so that event is lost with the tamper.
// Nothing crashes, the outcome is the conductor's, the other phases end
// right, and every effect is counted.
func TestEventLogTruncatedMidLine(t *testing.T) {
	t.Parallel()
	var whole int
	r, res := logTamperRun(t, "CC7", "Log cut.", func(r *rig, events string, before taskapi.Status) {
		data, err := os.ReadFile(events)
		require.NoError(t, err)
		// Cut in the middle of the last line (phase_start of test).
		lastStart := strings.LastIndexByte(strings.TrimSuffix(string(data), "\n"), '\n') + 1
		cut := lastStart + (len(data)-lastStart)/2
		whole = strings.Count(string(data[:cut]), "\n")
		require.NoError(t, os.Truncate(events, int64(cut)))
		// The prefix is read again before the conductor writes more, so the
		// log cannot grow past the old cursor unnoticed.
		r.WaitFor("CC7", "surviving prefix re-read", func(s taskapi.Status) bool {
			return s.EventsApplied == before.EventsApplied+whole
		})
	})
	require.EqualValues(t, "completed", res.Outcome.TaskStatus, "plan_completed decides")
	require.Equal(t, mapping.PhasePassed, res.Brief.Phases["implement"].Status)
	require.Equal(t, mapping.PhasePassed, res.Brief.Phases["docs"].Status)
	// Its phase_passed was torn; the plan completed, so the settling patch
	// at the end says passed rather than leave it running.
	require.Equal(t, mapping.PhasePassed, res.Brief.Phases["test"].Status, "the completed plan settles the torn phase")
	// 8 events, the re-read prefix once more, minus the torn phase_passed,
	// plus the settling entry.
	require.Len(t, res.Brief.Log, 8+whole-1+1)
	require.Equal(t, "settle", res.Brief.Log[len(res.Brief.Log)-1].Action)
	st, err := r.Status("CC7")
	require.NoError(t, err)
	require.Equal(t, 1, st.Malformed, "the torn line")
	require.Contains(t, st.LastMalformed, "offset")
	assertNoConductorGroups(t, r)
}

// stateTamperRun lets the conductor end without a terminal event (a phase
// exhausted its attempts) while no worker runs, tampers with state.json,
// and starts a worker again: the workflow must explain the end from what
// is left.
func stateTamperRun(t *testing.T, taskID string, tamper func(path string)) (*rig, taskapi.Result) {
	r := newRig(t, testrig.Options{})
	r.Workspace(taskID)
	// implement takes 3 s, the window in which the test sees it running;
	// from there on nothing depends on time.
	run := r.Start(testrig.Dispatch(t, taskID, "State lost. [sim phase=implement delay=3s] [sim phase=test fail=always]"))
	s := r.WaitPhase(taskID, "implement")
	h := conductorHandle(t, r, taskID, s.PlanName)

	// Freeze first so the conductor cannot finish while this worker still
	// reads its state.
	freezeConductor(t, h)
	require.NoError(t, r.KillWorker())
	thawConductor(t, h)
	awaitConductorExit(t, h)
	state := filepath.Join(r.TaskDir(taskID), ".edda", "conductor", s.PlanName, "state.json")
	_, err := os.Stat(state)
	require.NoError(t, err, "the conductor wrote state.json")
	tamper(state)
	r.StartWorker()
	return r, r.Result(run)
}

func TestStateJSONMissing(t *testing.T) {
	t.Parallel()
	r, res := stateTamperRun(t, "CC8", func(path string) { require.NoError(t, os.Remove(path)) })
	last := requireBlocked(t, r, "CC8", res)
	// The event log shows the last allowed attempt failed: that decides,
	// whatever happened to state.json afterwards.
	require.Equal(t, "Phase test failed after 3 attempts: check failed: cmd `cargo test` exited 1: eddasim: simulated check failure (attempt 3)", last)
	assertNoConductorGroups(t, r)
}

func TestStateJSONCorrupt(t *testing.T) {
	t.Parallel()
	r, res := stateTamperRun(t, "CC9", func(path string) {
		require.NoError(t, os.WriteFile(path, []byte(`{"plan_name": "x", "plan_status": "runn`), 0o644))
	})
	last := requireBlocked(t, r, "CC9", res)
	// The event log shows the last allowed attempt failed: that decides,
	// whatever happened to state.json afterwards.
	require.Equal(t, "Phase test failed after 3 attempts: check failed: cmd `cargo test` exited 1: eddasim: simulated check failure (attempt 3)", last)
	assertNoConductorGroups(t, r)
}

// noWorkflowTaskFailures asserts that the workflow code never failed on
// what it read: a panic or a non-determinism would show here.
func noWorkflowTaskFailures(t *testing.T, r *rig, taskID string) {
	t.Helper()
	for _, ev := range r.History(taskID).GetEvents() {
		require.NotEqual(t, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, ev.GetEventType(),
			"workflow task failed: %v", ev.GetWorkflowTaskFailedEventAttributes())
	}
}
