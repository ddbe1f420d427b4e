package taskact

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/mapping"
)

// refusingSink refuses every request the way karvi refuses a rotated
// token: 401, which no retry can fix.
type refusingSink struct{ patches, statuses, reads int }

func (s *refusingSink) refuse(op string) error {
	return &karvi.Error{Op: op, Status: 401, Kind: karvi.KindUnauthorized, Message: "invalid token"}
}

func (s *refusingSink) PatchBrief(context.Context, string, json.RawMessage) error {
	s.patches++
	return s.refuse("PATCH /api/brief/T5")
}

func (s *refusingSink) SetStatus(context.Context, string, sink.StatusUpdate) error {
	s.statuses++
	return s.refuse("PATCH /api/tasks/T5")
}

func (s *refusingSink) CurrentBrief(context.Context, string) (map[string]any, error) {
	s.reads++
	return nil, s.refuse("GET /api/brief/T5")
}

// A delivery that resumes after a crash reads the sink's brief first. A
// refusal there (a rotated token, a task deleted from the board) is the
// same refusal an ordinary delivery records and goes past: it must not
// fail the delivery, which would fail the task workflow and leave its
// conductor running with no one to stop it.
func TestResumedDeliveryRecordsARefusedRead(t *testing.T) {
	events, err := os.ReadFile("../../testdata/examples/A/events.snake.jsonl")
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	require.NoError(t, os.WriteFile(path, events, 0o644))
	refusing := &refusingSink{}
	a := &Activities{Sink: refusing}
	summary := mapping.PlanSummary{Name: "karvi-t5-020d01", PhaseIDs: []string{"implement", "test", "docs"}}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.DeliverEvents, DeliverRequest{
		TaskID: "T5", Plan: PlanInfo{EventsPath: path, RunDir: dir}, Brief: mapping.NewBriefState("T5", summary),
		Unconfirmed: true, TaskStatus: mapping.TaskDispatched,
	})
	require.NoError(t, err, "a refused resume read fails the delivery")
	var res DeliverResult
	require.NoError(t, v.Get(&res))
	require.Equal(t, 1, refusing.reads)
	require.Contains(t, res.SinkProblem, "invalid token")
	require.Equal(t, 8, res.Events, "every event is still reduced")
	require.NotNil(t, res.Outcome, "the terminal event still decides the attempt")
	require.Equal(t, 1, refusing.patches, "after the first refused patch the rest is only reduced")
}
