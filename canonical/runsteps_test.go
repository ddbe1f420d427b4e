package canonical

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFromRunStepTable(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ctx := StepContext{RunID: RunIDForRun("user-profiles"), TaskID: "user-profiles",
		Source: StepSource("default", "karvi-run-user-profiles", "r1")}
	for _, c := range []struct {
		step        RunStep
		agent       string
		state       State
		typ         Type
		payloadKeys map[string]any
	}{
		{RunStep{To: "active"}, RunAgent, StateRunning, TypeStateChange, map[string]any{"from": "idle", "to": "running", "trigger": "active"}},
		{RunStep{Task: "api", To: "queued", Title: "Profile API"}, "task-api", StateIdle, TypeTaskSpawn, map[string]any{"status": "queued", "title": "Profile API"}},
		{RunStep{Task: "api", From: "queued", To: "running", Attempt: 1, Model: "opus"}, "task-api", StateRunning, TypeStateChange,
			map[string]any{"from": "idle", "to": "running", "trigger": "running", "attempt": 1.0, "model": "opus"}},
		{RunStep{Task: "e2e", From: "queued", To: "blocked", Reason: "blocked by ui"}, "task-e2e", StateIdle, TypeTaskUpdate, map[string]any{"status": "blocked", "message": "blocked: blocked by ui"}},
		{RunStep{Task: "e2e", From: "running", To: "blocked", Reason: "blocked by ui"}, "task-e2e", StateBlocked, TypeStateChange, map[string]any{"reason": "blocked by ui"}},
		{RunStep{Task: "api", From: "running", To: "done", Attempt: 1}, "task-api", StateDone, TypeTaskDone, map[string]any{"result": "success"}},
		{RunStep{Task: "ui", From: "running", To: "failed", Reason: "check failed", Loops: 5}, "task-ui", StateError, TypeError,
			map[string]any{"error_type": "task_failed", "message": "check failed", "loops": 5.0}},
		{RunStep{Task: "ui", From: "failed", To: "skipped"}, "task-ui", StateFailed, TypeTaskDone, map[string]any{"result": "skipped"}},
		{RunStep{Task: "ui", From: "queued", To: "skipped"}, "task-ui", StateCancelled, TypeTaskDone, map[string]any{"result": "skipped"}},
		{RunStep{Task: "ui", From: "running", To: "needs-human-rebase", Reason: "conflicts in a.go"}, "task-ui", StateBlocked, TypeStateChange, map[string]any{"reason": "conflicts in a.go"}},
		{RunStep{Task: "ui", From: "running", To: "paused"}, "task-ui", StateWaiting, TypeStateChange, nil},
		{RunStep{From: "active", To: "partial", Reason: "4 of 6 done"}, RunAgent, StateDone, TypeTaskDone, map[string]any{"result": "partial"}},
		{RunStep{To: "budget", Reason: "Budget warning: $0.41 spent of $0.50 (82%)"}, RunAgent, StateRunning, TypeMessage,
			map[string]any{"source_type": "budget", "message": "Budget warning: $0.41 spent of $0.50 (82%)"}},
		{RunStep{Task: "x", To: "in-review"}, "task-x", StateRunning, TypeMessage, map[string]any{"source_type": "run_step"}},
	} {
		c.step.TS, c.step.Seq = at, 7
		ev := FromRunStep(c.step, ctx)
		got, warns, err := Validate(ev)
		require.NoError(t, err, "%+v", c.step)
		require.Empty(t, warns, "%+v", c.step)
		require.Equal(t, c.agent, got.AgentID)
		require.Equal(t, c.state, got.State, "%+v", c.step)
		require.Equal(t, c.typ, got.Type, "%+v", c.step)
		require.Equal(t, "run-karvi-run-user-profiles", got.RunID)
		require.Equal(t, "temporal://default/workflows/karvi-run-user-profiles/r1#seq=7", got.RawRef)
		if c.step.Task != "" {
			require.Equal(t, RunAgent, got.ParentAgentID)
			require.Equal(t, "task-"+c.step.Task, got.TaskID)
		}
		var p map[string]any
		require.NoError(t, json.Unmarshal(got.Payload, &p))
		for k, v := range c.payloadKeys {
			require.Equal(t, v, p[k], "%s of %+v", k, c.step)
		}
	}
}

// A run's task, whatever its statuses, makes a stream that keeps to the
// transition table: replayed through Follow and Validate, no warning and
// no bridge. Each case is a path a run's task takes.
func TestRunTaskPathsFollowTheTable(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ctx := StepContext{RunID: RunIDForRun("r"), TaskID: "r", Source: StepSource("default", "karvi-run-r", "r1")}
	for _, c := range []struct {
		name     string
		statuses []string
		want     []string
	}{
		{"blocked by a failed dependency before it ran",
			[]string{"queued", "blocked"},
			[]string{"idle/task_spawn", "idle/task_update"}},
		{"blocked, then released by a retry of its dependency (the run reopened)",
			[]string{"queued", "blocked", "queued", "running", "done"},
			[]string{"idle/task_spawn", "idle/task_update", "idle/task_update", "running/state_change", "done/task_done"}},
		{"failed, retried, done",
			[]string{"queued", "running", "failed", "queued", "running", "done"},
			[]string{"idle/task_spawn", "running/state_change", "error/error", "error/task_update", "running/state_change", "done/task_done"}},
		{"looped: queued again after it ran, then done",
			[]string{"queued", "running", "queued", "running", "done"},
			[]string{"idle/task_spawn", "running/state_change", "error/task_update", "running/state_change", "done/task_done"}},
		{"failed, then skipped",
			[]string{"queued", "running", "failed", "skipped"},
			[]string{"idle/task_spawn", "running/state_change", "error/error", "failed/task_done"}},
		{"paused before it ran, then run",
			[]string{"queued", "paused", "running", "paused", "running", "done"},
			[]string{"idle/task_spawn", "idle/task_update", "running/state_change", "waiting/state_change", "running/state_change", "done/task_done"}},
		{"a conflict, blocked again, resolved",
			[]string{"queued", "running", "needs-human-rebase", "blocked", "running", "done"},
			[]string{"idle/task_spawn", "running/state_change", "blocked/state_change", "blocked/task_update", "running/state_change", "done/task_done"}},
		{"skipped before it ran",
			[]string{"queued", "skipped"},
			[]string{"idle/task_spawn", "cancelled/task_done"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Stream
			var got []string
			var prev State
			from := ""
			for i, to := range c.statuses {
				ev := FromRunStep(RunStep{Seq: i + 1, TS: at, Task: "a", From: from, To: to, Prev: prev}, ctx)
				out := s.Follow(ev)
				require.Len(t, out, 1, "no bridge for %s", to)
				v, warns, err := s.Validate(out[0])
				require.NoError(t, err)
				require.Empty(t, warns, "%s -> %s", from, to)
				got = append(got, string(v.State)+"/"+string(v.Type))
				prev, from = v.State, to
			}
			require.Equal(t, c.want, got)
		})
	}
}
