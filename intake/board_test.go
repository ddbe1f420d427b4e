package intake

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func loadBoard(t *testing.T) Board {
	t.Helper()
	data, err := os.ReadFile("testdata/board.json")
	require.NoError(t, err)
	b, err := DecodeBoard(data)
	require.NoError(t, err)
	return b
}

func TestDecodeBoardRealShape(t *testing.T) {
	b := loadBoard(t)
	assert.Equal(t, int64(42), b.Version)
	assert.Equal(t, "ship the parser", b.TaskPlan.Goal)
	require.Len(t, b.TaskPlan.Tasks, 4)
	t2, ok := b.Task("T2")
	require.True(t, ok)
	assert.Equal(t, StatusDispatched, t2.Status)
	assert.Equal(t, []string{"T1"}, t2.Depends)
	assert.Equal(t, "edda", t2.RuntimeHint)
	assert.Equal(t, "opus", t2.ModelHint)
	assert.Len(t, t2.History, 2)
	t3, _ := b.Task("T3")
	assert.Empty(t, t3.Spec, "spec: null reads as empty")
	assert.True(t, b.agent("engineer_lite"))
	assert.False(t, b.agent("human-ops"))
	require.NotNil(t, b.Controls.MaxReviewAttempts)
	assert.Equal(t, 2, *b.Controls.MaxReviewAttempts)
}

func TestDecodeBoardKeepsABadTask(t *testing.T) {
	b, err := DecodeBoard([]byte(`{"_version":3,"taskPlan":{"tasks":[
		{"id":"A","title":"ok","status":"dispatched"},
		{"id":"B","title":"bad","depends":"A"},
		{"title":7}]}}`))
	require.NoError(t, err)
	require.Len(t, b.TaskPlan.Tasks, 3)
	assert.Empty(t, b.TaskPlan.Tasks[0].DecodeErr)
	assert.Equal(t, "B", b.TaskPlan.Tasks[1].ID)
	assert.Equal(t, "depends: must be an array, got string", b.TaskPlan.Tasks[1].DecodeErr)
	assert.Equal(t, "tasks[2]", b.TaskPlan.Tasks[2].ID)
	assert.Contains(t, b.TaskPlan.Tasks[2].DecodeErr, "title: must be a string")
}

func TestDecodeBoardErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, "board: must be a JSON object"},
		{`[]`, "board: must be a JSON object"},
		{`{"_version":"x"}`, `board: _version: must be a whole number, got "x"`},
		{`{"_version":1.5}`, "board: _version: must be a whole number, got 1.5"},
		{`{"taskPlan":{"tasks":{}}}`, "board: taskPlan.tasks: must be an array"},
		{`{"controls":{"auto_dispatch":"yes"}}`, "board: controls.auto_dispatch: must be a boolean, got string"},
		{`{"projects":[{"id":1}]}`, "board: projects[0].id: must be a string, got number"},
	} {
		_, err := DecodeBoard([]byte(tc.in))
		require.Error(t, err, tc.in)
		assert.Contains(t, err.Error(), tc.want, tc.in)
	}
}

func TestDecodeBoardEmptyAndNulls(t *testing.T) {
	b, err := DecodeBoard([]byte(`{"_version":null,"taskPlan":null,"controls":null,"projects":null}`))
	require.NoError(t, err)
	assert.Zero(t, b.Version)
	assert.Empty(t, b.TaskPlan.Tasks)
}
