package intakeact

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/intake"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/testkit/karvifake"
)

const token = "intake-test-token"

func fake(t *testing.T, tasks ...karvifake.Task) *karvifake.Server {
	t.Helper()
	k := karvifake.New(karvifake.Options{Token: token, RateLimit: karvifake.RateLimitOff})
	for _, tk := range tasks {
		require.NoError(t, k.AddTask(tk))
	}
	_, err := k.Start()
	require.NoError(t, err)
	t.Cleanup(k.Close)
	return k
}

func ours(id string) karvifake.Task {
	return karvifake.Task{ID: id, Title: "Task " + id, Status: "dispatched", Fields: map[string]any{"runtimeHint": "edda"}}
}

func follow(t *testing.T, k *karvifake.Server, tok string, in intakeapi.FollowInput) (intakeapi.FollowResult, error) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	a := &Activities{Karvi: func(u string) (*karvi.Client, error) { return karvi.New(u, tok) }}
	a.Register(env)
	in.BoardURL = k.URL()
	v, err := env.ExecuteActivity(intakeapi.FollowActivity, in)
	if err != nil {
		return intakeapi.FollowResult{}, err
	}
	var res intakeapi.FollowResult
	require.NoError(t, v.Get(&res))
	return res, nil
}

// A task of ours on the board at the start is returned at once: nothing
// dispatched while the intake was down is missed.
func TestFollowReturnsBoardWithWorkAtOnce(t *testing.T) {
	k := fake(t, ours("T1"))
	res, err := follow(t, k, token, intakeapi.FollowInput{Poll: time.Minute, MaxWait: 10 * time.Second})
	require.NoError(t, err)
	require.NotEmpty(t, res.Board)
	b, err := intake.DecodeBoard(res.Board)
	require.NoError(t, err)
	require.Equal(t, "T1", b.TaskPlan.Tasks[0].ID)
	require.EqualValues(t, k.Version(), b.Version)
}

// Nothing to do at the start: the follower waits on the live feed, and a
// task dispatched meanwhile comes through it well before the next poll.
func TestFollowWaitsForTheFeed(t *testing.T) {
	k := fake(t, karvifake.Task{ID: "X1", Title: "elsewhere", Status: "dispatched", Fields: map[string]any{"runtimeHint": "openclaw"}})
	go func() {
		for k.Feeds() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		_ = k.AddTask(ours("T2"))
	}()
	start := time.Now()
	res, err := follow(t, k, token, intakeapi.FollowInput{Poll: time.Hour, MaxWait: 30 * time.Second})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 25*time.Second, "the feed, not the time limit")
	b, err := intake.DecodeBoard(res.Board)
	require.NoError(t, err)
	_, ok := b.Task("T2")
	require.True(t, ok)
}

// A board with nothing new for the intake (the task already claimed and
// running is not described here: none is) is not returned.
func TestFollowIgnoresBoardsWithNothingNew(t *testing.T) {
	k := fake(t, karvifake.Task{ID: "X1", Title: "elsewhere", Status: "dispatched", Fields: map[string]any{"runtimeHint": "openclaw"}})
	res, err := follow(t, k, token, intakeapi.FollowInput{Poll: 200 * time.Millisecond, MaxWait: 2 * time.Second})
	require.NoError(t, err)
	require.Empty(t, res.Board, "waited out MaxWait")
	require.Empty(t, res.Problem)
}

// A wrong token: Unauthorized at once, with karvi's answer.
func TestFollowUnauthorized(t *testing.T) {
	k := fake(t, ours("T1"))
	res, err := follow(t, k, "wrong", intakeapi.FollowInput{MaxWait: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, res.Unauthorized)
	require.Contains(t, res.Problem, "401")
}

// karvi down: the problem is returned, once, for the status to show.
func TestFollowKarviDown(t *testing.T) {
	k := fake(t)
	require.NoError(t, k.SetDown(true))
	res, err := follow(t, k, token, intakeapi.FollowInput{MaxWait: 10 * time.Second})
	require.NoError(t, err)
	require.Contains(t, res.Problem, "connection refused")
	require.False(t, res.Unauthorized)
}

// Trim keeps what the intake reads and drops the rest of karvi's board.
func TestTrimKeepsWhatTheIntakeReads(t *testing.T) {
	raw := `{"_version":7,"signals":[{"big":"x"}],"lessons":[1],"controls":{"auto_dispatch":false},
	 "taskPlan":{"goal":"g","phase":"executing","tasks":[
	  {"id":"T1","title":"t","status":"dispatched","runtimeHint":"edda","childSessionKey":"s","steps":[{"state":"succeeded","output_ref":"r","log":"long"}],
	   "history":[{"ts":"x","status":"dispatched","by":"api","extra":1}],"result":{"summary":"s","payload":{"a":1},"raw":"big"}},
	  "not a task"]}}`
	out, err := Trim([]byte(raw))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	require.JSONEq(t, `{"_version":7,"controls":{"auto_dispatch":false},"taskPlan":{"goal":"g","tasks":[
	  {"id":"T1","title":"t","status":"dispatched","runtimeHint":"edda","steps":[{"state":"succeeded","output_ref":"r"}],
	   "history":[{"status":"dispatched","by":"api"}],"result":{"summary":"s","payload":{"a":1}}},
	  "not a task"]}}`, string(out))
	b, err := intake.DecodeBoard(out)
	require.NoError(t, err)
	require.Len(t, b.TaskPlan.Tasks, 2)
	require.NotEmpty(t, b.TaskPlan.Tasks[1].DecodeErr, "the bad task is still reported")
	_, err = Trim([]byte(`<html>`))
	require.ErrorContains(t, err, "not a JSON object")
}

// A board that does not decode is a problem reported once, not a board
// returned again and again (each return is a tick in the history).
func TestFollowReportsAnUnreadableBoardOnce(t *testing.T) {
	k := fake(t)
	k.SetControls(map[string]any{"auto_dispatch": "yes please"})
	res, err := follow(t, k, token, intakeapi.FollowInput{Poll: 100 * time.Millisecond, MaxWait: 5 * time.Second})
	require.NoError(t, err)
	require.Empty(t, res.Board)
	require.Contains(t, res.Problem, "controls.auto_dispatch")
	start := time.Now()
	again, err := follow(t, k, token, intakeapi.FollowInput{Poll: 100 * time.Millisecond, MaxWait: time.Second, Problem: res.Problem})
	require.NoError(t, err)
	require.Empty(t, again.Board)
	require.Equal(t, res.Problem, again.Problem)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "waited: nothing new")
}
