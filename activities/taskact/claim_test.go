package taskact

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/account"
)

// hangingAccounts is a Temporal client whose account never answers: its
// workflow runs on a queue no worker serves any more. The join signal goes
// through unless signal says otherwise.
type hangingAccounts struct {
	updates int
	signal  func(ctx context.Context) error
}

func (h *hangingAccounts) NewWithStartWorkflowOperation(client.StartWorkflowOptions, any, ...any) client.WithStartWorkflowOperation {
	return nil
}

func (h *hangingAccounts) UpdateWithStartWorkflow(ctx context.Context, _ client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	h.updates++
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hangingAccounts) SignalWorkflow(context.Context, string, string, string, any) error {
	return nil
}

func (h *hangingAccounts) SignalWithStartWorkflow(ctx context.Context, _, _ string, _ any, _ client.StartWorkflowOptions,
	_ any, _ ...any) (client.WorkflowRun, error) {
	if h.signal != nil {
		return nil, h.signal(ctx)
	}
	return nil, nil
}

func (h *hangingAccounts) DescribeWorkflow(ctx context.Context, _, _ string) (*client.WorkflowExecutionDescription, error) {
	h.updates++
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hangingAccounts) QueryWorkflow(ctx context.Context, _, _, _ string, _ ...any) (converter.EncodedValue, error) {
	h.updates++
	<-ctx.Done()
	return nil, ctx.Err()
}

// A claim asked to join the worker's account names it; an account that
// does not answer holds the claim no longer than joinWait, and the task
// goes on alone rather than never starting.
func TestClaimJoinsTheWorkersAccountWithinABound(t *testing.T) {
	defer func(w time.Duration) { joinWait = w }(joinWait)
	joinWait = 100 * time.Millisecond
	h := &hangingAccounts{}
	a := &Activities{Config: activities.Config{Host: "h1", Account: "default.q"}, Accounts: &accountapi.Joins{Client: h}}
	var env testsuite.WorkflowTestSuite
	aenv := env.NewTestActivityEnvironment()
	aenv.RegisterActivity(a)

	start := time.Now()
	v, err := aenv.ExecuteActivity(a.ClaimHost, ClaimHostRequest{TaskID: "T5", Attempt: 1, JoinAccount: true})
	require.NoError(t, err)
	var res ClaimHostResult
	require.NoError(t, v.Get(&res))
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, "h1", res.Host)
	require.Equal(t, "default.q", res.Account)
	require.Nil(t, res.Joined)
	require.NotEmpty(t, res.AccountProblem)
	require.Equal(t, 1, h.updates)

	v, err = aenv.ExecuteActivity(a.ClaimHost, ClaimHostRequest{TaskID: "T5", Attempt: 1})
	require.NoError(t, err)
	var plain ClaimHostResult
	require.NoError(t, v.Get(&plain))
	require.Equal(t, ClaimHostResult{Host: "h1"}, plain, "not asked: no account")
}

// A claim whose join went through but whose read of the account's pause
// ran out of time says the task joined: it is a member and must leave at
// the end. One whose signal ran out of time on the way may have joined,
// and says so too (a leave from a task that is no member changes
// nothing); one whose signal was refused did not join.
func TestClaimSaysWhetherTheJoinSignalWent(t *testing.T) {
	defer func(w time.Duration) { joinWait = w }(joinWait)
	joinWait = 100 * time.Millisecond
	for _, tc := range []struct {
		name   string
		signal func(ctx context.Context) error
		sent   bool
		reads  int
	}{
		{"read timed out", nil, true, 1},
		{"refused", func(context.Context) error { return errors.New("namespace not found") }, false, 0},
		{"signal timed out", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hangingAccounts{signal: tc.signal}
			a := &Activities{Config: activities.Config{Host: "h1", Account: "default.q"}, Accounts: &accountapi.Joins{Client: h}}
			var env testsuite.WorkflowTestSuite
			aenv := env.NewTestActivityEnvironment()
			aenv.RegisterActivity(a)
			v, err := aenv.ExecuteActivity(a.ClaimHost, ClaimHostRequest{TaskID: "T5", Attempt: 1, JoinAccount: true})
			require.NoError(t, err)
			var res ClaimHostResult
			require.NoError(t, v.Get(&res))
			require.Nil(t, res.Joined)
			require.NotEmpty(t, res.AccountProblem)
			require.Equal(t, tc.sent, res.JoinSent, res.AccountProblem)
			require.Equal(t, tc.reads, h.updates, "a read only after a join signal that went")
		})
	}
}
