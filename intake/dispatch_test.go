package intake

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/mapping"
)

func TestOurs(t *testing.T) {
	cfg := Config{}
	for _, tc := range []struct {
		name string
		task Task
		want bool
	}{
		{"dispatched, routed", Task{RuntimeHint: "edda", Status: StatusDispatched}, true},
		{"pending waits for karvi", Task{RuntimeHint: "edda", Status: StatusPending}, false},
		{"in_progress is taken", Task{RuntimeHint: "edda", Status: StatusInProgress}, false},
		{"cancelled", Task{RuntimeHint: "edda", Status: StatusCancelled}, false},
		{"other runtime", Task{RuntimeHint: "openclaw", Status: StatusDispatched}, false},
		{"no hint (POST /api/tasks drops it)", Task{Status: StatusDispatched}, false},
		{"hint is case-sensitive", Task{RuntimeHint: "Edda", Status: StatusDispatched}, false},
	} {
		assert.Equal(t, tc.want, Ours(tc.task, cfg), tc.name)
	}
	assert.True(t, Ours(Task{RuntimeHint: "edda-b", Status: StatusDispatched}, Config{RuntimeHint: "edda-b"}))
	assert.False(t, Ours(Task{RuntimeHint: "edda", Status: StatusDispatched}, Config{RuntimeHint: "edda-b"}))
}

func TestBuildDispatchAsKarviBuildsIt(t *testing.T) {
	b := loadBoard(t)
	t2, _ := b.Task("T2")
	d, err := BuildDispatch(t2, b, Config{})
	require.NoError(t, err)
	assert.Equal(t, "T2", d.TaskID)
	assert.Equal(t, "intake-T2", d.PlanID)
	assert.Equal(t, mapping.ModeDispatch, d.Mode)
	assert.Equal(t, "Write the parser\n\nRecursive descent.\n\nFollow the grammar in docs/grammar.md.", d.Message)
	require.NotNil(t, d.ModelHint)
	assert.Equal(t, "opus", *d.ModelHint)
	require.NotNil(t, d.TimeoutSec)
	assert.Equal(t, 300, *d.TimeoutSec)
	assert.Equal(t, []string{"go-dev"}, d.RequiredSkills)
	assert.Equal(t, "go-dev", d.Skill)
	assert.Equal(t, []string{"T1"}, d.UpstreamTaskIDs)
	assert.Equal(t, "human-ops", d.UserID)
	assert.Equal(t, "human-ops", d.AgentID)
	require.Len(t, d.Artifacts, 1)
	a := d.Artifacts[0]
	assert.Equal(t, "T1", a.ID)
	assert.Equal(t, "Write the lexer", a.Title)
	assert.Equal(t, StatusApproved, a.Status)
	assert.Equal(t, "Lexer done: 14 token kinds.", a.Summary, "lastReply wins over result.summary")
	assert.JSONEq(t, `{"pr":7}`, string(a.Payload))
	assert.Equal(t, "artifacts/T1/impl.json", a.OutputRef, "the last succeeded step")
	c := d.ControlsSnapshot
	require.NotNil(t, c)
	assert.Equal(t, 2, *c.MaxReviewAttempts, "the board's control")
	assert.Equal(t, 70.0, *c.QualityThreshold, "karvi's default")
	assert.False(t, *c.AutoDispatch)
	assert.True(t, *c.AutoReview)
	assert.False(t, *c.AutoRedispatch)
	require.NoError(t, d.Validate())

	d, err = BuildDispatch(t2, b, Config{TimeoutSec: 900})
	require.NoError(t, err)
	assert.Equal(t, 900, *d.TimeoutSec)
}

func TestBuildDispatchSummaryCut(t *testing.T) {
	long := strings.Repeat("é", 700)
	b := Board{TaskPlan: TaskPlan{Tasks: []Task{
		{ID: "U", Title: "up", Status: StatusApproved, Result: &TaskResult{Summary: long}},
		{ID: "V", Title: "up2", Status: StatusApproved, LastReply: strings.Repeat("a", 599) + "😀b"},
		{ID: "D", Title: "down", Status: StatusDispatched, RuntimeHint: "edda", Depends: []string{"U", "gone", "V"}},
	}}}
	d, err := BuildDispatch(b.TaskPlan.Tasks[2], b, Config{})
	require.NoError(t, err)
	require.Len(t, d.Artifacts, 2, "an upstream task not on the board is skipped, as karvi does")
	assert.Equal(t, strings.Repeat("é", 600), d.Artifacts[0].Summary)
	assert.Equal(t, strings.Repeat("a", 599), d.Artifacts[1].Summary, "a surrogate pair cut in half is dropped")
	assert.Equal(t, []string{"U", "gone", "V"}, d.UpstreamTaskIDs)
	assert.Equal(t, "default", d.UserID, "no human participant")
}

func TestBuildDispatchErrorsNameTheField(t *testing.T) {
	base := Task{ID: "T", Title: "do it", Status: StatusDispatched, RuntimeHint: "edda"}
	for _, tc := range []struct {
		name  string
		edit  func(t *Task, b *Board)
		cfg   Config
		field string
	}{
		{"no title", func(t *Task, _ *Board) { t.Title = "  " }, Config{}, "title"},
		{"bad id", func(t *Task, _ *Board) { t.ID = "has space" }, Config{}, "id"},
		{"bad skill", func(t *Task, _ *Board) { t.Skill = "Go Dev" }, Config{}, "skill"},
		{"huge message", func(t *Task, _ *Board) { t.Description = strings.Repeat("x", mapping.MaxMessageBytes) }, Config{}, "description and spec (the message)"},
		{"review attempts", func(_ *Task, b *Board) { n := 0; b.Controls.MaxReviewAttempts = &n }, Config{}, "controls.max_review_attempts"},
		{"timeout", func(*Task, *Board) {}, Config{TimeoutSec: -1}, "timeoutSec (intake configuration)"},
		{"undecodable", func(t *Task, _ *Board) { t.DecodeErr = "depends: must be an array, got string" }, Config{}, "depends"},
	} {
		task, b := base, Board{}
		tc.edit(&task, &b)
		_, err := BuildDispatch(task, b, tc.cfg)
		var fe *FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", tc.name, err)
		assert.Equal(t, tc.field, fe.Field, tc.name)
		assert.Contains(t, err.Error(), "task "+task.ID+": "+tc.field+": ", tc.name)
	}
}
