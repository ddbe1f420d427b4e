package accountflow

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/account"
)

type accountCalls struct {
	mu      sync.Mutex
	notices map[string][]accountapi.Notice
}

func newAccountEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *accountCalls) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(AccountWorkflow, workflow.RegisterOptions{Name: accountapi.WorkflowName})
	c := &accountCalls{notices: map[string][]accountapi.Notice{}}
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", accountapi.SignalNotice, mock.Anything).Return(
		func(_, wid, _, _ string, arg any) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.notices[wid] = append(c.notices[wid], arg.(accountapi.Notice))
			return nil
		})
	return env, c
}

func accountUpd(t *testing.T, env *testsuite.TestWorkflowEnvironment, name string, arg any, got *accountapi.View) {
	env.UpdateWorkflow(name, name+time.Now().String(), &testsuite.TestUpdateCallback{
		OnReject: func(err error) { t.Errorf("%s rejected: %v", name, err) },
		OnAccept: func() {},
		OnComplete: func(v any, err error) {
			require.NoError(t, err)
			if got != nil {
				*got = v.(accountapi.View)
			}
		},
	}, arg)
}

// The account takes members, pauses on a limit and tells every other
// member, keeps the later of two pauses, answers a join with the pause,
// and a resume tells every member.
func TestAccountWorkflowPausesItsMembers(t *testing.T) {
	env, c := newAccountEnv(t)
	start := env.Now().UTC()
	until := start.Add(time.Hour).UTC()
	var joined, limited, again, late, resumed accountapi.View
	env.RegisterDelayedCallback(func() {
		accountUpd(t, env, accountapi.UpdateJoin, accountapi.JoinRequest{Member: "karvi-task-A"}, nil)
		accountUpd(t, env, accountapi.UpdateJoin, accountapi.JoinRequest{Member: "karvi-task-B"}, nil)
		accountUpd(t, env, accountapi.UpdateJoin, accountapi.JoinRequest{Member: "karvi-task-C"}, &joined)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		accountUpd(t, env, accountapi.UpdateLimit, accountapi.LimitRequest{Member: "karvi-task-A", Task: "A", Until: until, Phase: "test"}, &limited)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		// An earlier end changes nothing and tells no one.
		accountUpd(t, env, accountapi.UpdateLimit, accountapi.LimitRequest{Member: "karvi-task-B", Task: "B", Until: until.Add(-time.Minute)}, &again)
		env.SignalWorkflow(accountapi.SignalLeave, accountapi.LeaveSignal{Member: "karvi-task-C"})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		accountUpd(t, env, accountapi.UpdateJoin, accountapi.JoinRequest{Member: "karvi-task-D"}, &late)
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		accountUpd(t, env, accountapi.UpdateResume, accountapi.ResumeRequest{Reason: "limit raised"}, &resumed)
	}, 4*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 5*time.Minute)
	env.ExecuteWorkflow(accountapi.WorkflowName, accountapi.Input{Account: "team"})

	require.False(t, joined.Paused)
	require.Equal(t, []string{"karvi-task-A", "karvi-task-B", "karvi-task-C"}, joined.Members)
	require.True(t, limited.Paused)
	require.Equal(t, "A", limited.By)
	require.Equal(t, until, limited.PausedUntil.UTC())
	require.Equal(t, until, again.PausedUntil.UTC(), "the later pause holds")
	require.Equal(t, 1, again.Pauses)
	require.True(t, late.Paused, "a task joining a paused account learns of it")
	require.Equal(t, []string{"karvi-task-A", "karvi-task-B", "karvi-task-D"}, late.Members)
	require.False(t, resumed.Paused)

	require.Len(t, c.notices["karvi-task-A"], 1, "the task that met the limit hears only the resume")
	require.True(t, c.notices["karvi-task-A"][0].Resume)
	require.Len(t, c.notices["karvi-task-B"], 2)
	b := c.notices["karvi-task-B"][0]
	b.Until = b.Until.UTC()
	require.Equal(t, accountapi.Notice{Account: "team", Until: until, By: "A", Phase: "test"}, b)
	require.Equal(t, "limit raised", c.notices["karvi-task-B"][1].Reason)
	require.Len(t, c.notices["karvi-task-C"], 1, "C left before the resume")
	require.Len(t, c.notices["karvi-task-D"], 1)
}

// Many requests: the account continues-as-new with its pause and members.
func TestAccountWorkflowContinuesAsNew(t *testing.T) {
	env, _ := newAccountEnv(t)
	until := env.Now().Add(time.Hour)
	env.RegisterDelayedCallback(func() {
		accountUpd(t, env, accountapi.UpdateLimit, accountapi.LimitRequest{Member: "karvi-task-A", Until: until}, nil)
		accountUpd(t, env, accountapi.UpdateJoin, accountapi.JoinRequest{Member: "karvi-task-B"}, nil)
		accountUpd(t, env, accountapi.UpdateJoin, accountapi.JoinRequest{Member: "karvi-task-C"}, nil)
	}, time.Second)
	env.ExecuteWorkflow(accountapi.WorkflowName, accountapi.Input{Account: "team", ContinueAsNewAfter: 3})
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
}

// Workers join by signal, which any number of tasks can send at once: a
// member that joins an account not paused hears nothing, one that joins a
// paused account is sent the pause at once (it may have read the account
// just before the pause), and both are members the resume tells.
func TestAccountJoinBySignalSendsAPauseToTheNewMember(t *testing.T) {
	env, c := newAccountEnv(t)
	until := env.Now().Add(time.Hour).UTC()
	var view accountapi.View
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(accountapi.SignalJoin, accountapi.JoinRequest{Member: "karvi-task-A"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		accountUpd(t, env, accountapi.UpdateLimit, accountapi.LimitRequest{Member: "karvi-task-B", Task: "B", Until: until, Phase: "test"}, nil)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(accountapi.SignalJoin, accountapi.JoinRequest{Member: "karvi-task-C"})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		accountUpd(t, env, accountapi.UpdateResume, accountapi.ResumeRequest{Reason: "limit raised"}, &view)
	}, 3*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 4*time.Minute)
	env.ExecuteWorkflow(accountapi.WorkflowName, accountapi.Input{Account: "team"})

	require.Equal(t, []string{"karvi-task-A", "karvi-task-B", "karvi-task-C"}, view.Members)
	require.Len(t, c.notices["karvi-task-A"], 2, "A: the pause B met, then the resume")
	require.Len(t, c.notices["karvi-task-C"], 2, "C: the pause when it joined, then the resume")
	cn := c.notices["karvi-task-C"][0]
	cn.Until = cn.Until.UTC()
	require.Equal(t, accountapi.Notice{Account: "team", Until: until, By: "B", Phase: "test"}, cn)
	require.True(t, c.notices["karvi-task-C"][1].Resume)
}

// The account keeps its pause in its memo, where a joining worker reads
// it without a query: not paused from its start, paused with the limit's
// details, and not paused again after a resume; never its members.
func TestAccountPublishesItsPauseInTheMemo(t *testing.T) {
	env, _ := newAccountEnv(t)
	var mu sync.Mutex
	var memos []accountapi.View
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		mu.Lock()
		defer mu.Unlock()
		memos = append(memos, args.Get(0).(map[string]any)[accountapi.MemoPause].(accountapi.View))
	}).Return(nil)
	until := env.Now().Add(time.Hour).UTC()
	env.RegisterDelayedCallback(func() {
		accountUpd(t, env, accountapi.UpdateJoin, accountapi.JoinRequest{Member: "karvi-task-A"}, nil)
		accountUpd(t, env, accountapi.UpdateLimit, accountapi.LimitRequest{Member: "karvi-task-A", Task: "A", Until: until,
			Phase: "test", Source: "transcript", Text: "limit reached"}, nil)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		accountUpd(t, env, accountapi.UpdateResume, accountapi.ResumeRequest{Reason: "limit raised"}, nil)
	}, time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Minute)
	env.ExecuteWorkflow(accountapi.WorkflowName, accountapi.Input{Account: "acct"})

	require.Len(t, memos, 3)
	require.Equal(t, accountapi.View{Account: "acct"}, memos[0], "not paused from its start")
	paused := memos[1]
	require.True(t, paused.Paused)
	require.True(t, paused.PausedUntil.Equal(until))
	require.Equal(t, "A", paused.By)
	require.Equal(t, "limit reached", paused.Text)
	require.Nil(t, paused.Members, "the memo never carries the members")
	require.False(t, memos[2].Paused)
	require.True(t, memos[2].PausedUntil.IsZero(), "a resume clears the pause")
}
