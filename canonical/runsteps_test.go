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
		{RunStep{Task: "api", To: "queued", Title: "Profile API"}, "task-api", StateIdle, TypeStateChange, map[string]any{"to": "idle", "title": "Profile API"}},
		{RunStep{Task: "api", From: "queued", To: "running", Attempt: 1, Model: "opus"}, "task-api", StateRunning, TypeStateChange,
			map[string]any{"from": "idle", "to": "running", "trigger": "running", "attempt": 1.0, "model": "opus"}},
		{RunStep{Task: "e2e", From: "queued", To: "blocked", Reason: "blocked by ui"}, "task-e2e", StateBlocked, TypeStateChange, map[string]any{"reason": "blocked by ui"}},
		{RunStep{Task: "api", From: "running", To: "done", Attempt: 1}, "task-api", StateDone, TypeTaskDone, map[string]any{"result": "success"}},
		{RunStep{Task: "ui", From: "running", To: "failed", Reason: "check failed", Loops: 5}, "task-ui", StateFailed, TypeError,
			map[string]any{"error_type": "task_failed", "message": "check failed", "loops": 5.0}},
		{RunStep{Task: "ui", From: "failed", To: "skipped"}, "task-ui", StateCancelled, TypeTaskDone, map[string]any{"result": "skipped"}},
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
