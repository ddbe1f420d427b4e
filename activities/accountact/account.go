package accountact

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/internal/timescale"
)

// Client is the part of a Temporal client the account activities need.
type Client = accountapi.Temporal

// Leave tells account that member no longer runs on it, for an activity
// that ends a task (the task's last status write): a signal the task's
// history does not record. An account not running has nobody to drop.
func Leave(ctx context.Context, c Client, account, member string) error {
	err := accountapi.Accounts{Client: c}.Leave(ctx, account, member)
	var gone *serviceerror.NotFound
	if errors.As(err, &gone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("leave account %s: %w", account, err)
	}
	return nil
}

// Activities reach an agent account's workflow for a task workflow, which
// cannot send an update itself.
type Activities struct {
	Temporal Client
	// Scale divides how long a read of an account's pause is shared
	// (pauseFresh): the worker's time scale.
	Scale timescale.Scale

	// pauses shares the reads of an account's pause among the joins of
	// this worker (pauseRead).
	pauses pauseReads
}

// accounts is the accounts' client of an activity: an account it starts
// runs on the activity's task queue.
func (a *Activities) accounts(ctx context.Context) accountapi.Accounts {
	return accountapi.Accounts{Client: a.Temporal, TaskQueue: activity.GetInfo(ctx).TaskQueue}
}

// ErrBadAccount: an account key or request the account refused. Retrying
// cannot help.
const ErrBadAccount = "BadAccount"

// ErrJoinedUnread: the join's signal went to the account (or ran out of
// time on the way, and may have), but the account's pause could not be
// read. The task is, or may be, a member: it must leave at the end. The
// account tells a member that joins while it is paused so
// (accountapi.SignalJoin), so the pause is not lost either.
const ErrJoinedUnread = "JoinedUnread"

// JoinedUnread says whether err is a join's that may have made the task a
// member though it returned no view (ErrJoinedUnread).
func JoinedUnread(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == ErrJoinedUnread
}

// AccountRequest is one update to an agent account's workflow: join
// (Join set), a usage limit (Limit set) or a resume (Resume set).
type AccountRequest struct {
	Account string                    `json:"account"`
	Join    *accountapi.JoinRequest   `json:"join,omitempty"`
	Limit   *accountapi.LimitRequest  `json:"limit,omitempty"`
	Resume  *accountapi.ResumeRequest `json:"resume,omitempty"`
	// UpdateID makes a retried activity answered from the first update.
	UpdateID string `json:"updateId,omitempty"`
}

// AccountUpdate sends the request's update to the account's workflow,
// starting it on this worker's task queue if it does not run yet, and
// returns the account as the update left it.
func (a *Activities) AccountUpdate(ctx context.Context, req AccountRequest) (accountapi.View, error) {
	if a.Temporal == nil {
		return accountapi.View{}, temporal.NewNonRetryableApplicationError(
			"the worker has no Temporal client for the account activities", "NoClient", nil)
	}
	if err := accountapi.ValidName(req.Account); err != nil {
		return accountapi.View{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadAccount, err)
	}
	var name string
	var arg any
	switch {
	case req.Join != nil:
		return a.join(ctx, req.Account, *req.Join)
	case req.Limit != nil:
		name, arg = accountapi.UpdateLimit, *req.Limit
	case req.Resume != nil:
		name, arg = accountapi.UpdateResume, *req.Resume
	default:
		return accountapi.View{}, temporal.NewNonRetryableApplicationError(
			"account request names no update (join, limit or resume)", ErrBadAccount, nil)
	}
	v, err := a.accounts(ctx).Update(ctx, req.Account, name, req.UpdateID, arg)
	if err != nil {
		var refused *temporal.ApplicationError
		if errors.As(err, &refused) {
			return accountapi.View{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("account %s refused %s: %v", req.Account, name, err), ErrBadAccount, err)
		}
		return accountapi.View{}, fmt.Errorf("%s on account %s: %w", name, req.Account, err)
	}
	return v, nil
}

// readMemo reads the account's pause from its memo: inMemo is false for an
// account run from before the memo kept it.
func (a *Activities) readMemo(ctx context.Context, account string) (v accountapi.View, inMemo bool, err error) {
	desc, err := a.accounts(ctx).Describe(ctx, account)
	if err != nil {
		return accountapi.View{}, false, fmt.Errorf("read account %s: %w", account, err)
	}
	if _, ok := desc.Memo.GetFields()[accountapi.MemoPause]; !ok {
		return accountapi.View{}, false, nil
	}
	if err := desc.GetMemoValue(accountapi.MemoPause, &v); err != nil {
		return accountapi.View{}, false, fmt.Errorf("read account %s's pause: %w", account, err)
	}
	return v, true, nil
}

// join makes member a member of account by signal (starting the account's
// workflow if it does not run), then reads the account's pause from its
// memo (accountapi.MemoPause) with a describe the server answers alone.
// Both scale: a server admits only a few updates in flight per workflow,
// every task of a queue joins its worker's account, many at once, and a
// query would wait for the account's worker behind every other join.
// Should the account pause between the read and the join's taking
// effect, the account sends the new member the pause
// (accountapi.SignalJoin). An account run started before the memo kept
// the pause is read by query. A join that may have made the task a member
// without reading the pause fails with ErrJoinedUnread, for the task to
// leave all the same.
func (a *Activities) join(ctx context.Context, account string, r accountapi.JoinRequest) (accountapi.View, error) {
	if r.Member == "" {
		return accountapi.View{}, temporal.NewNonRetryableApplicationError(
			"join needs the member's workflow id", ErrBadAccount, nil)
	}
	err := a.accounts(ctx).Join(ctx, account, r)
	if err != nil {
		if ctx.Err() != nil {
			// The server may have taken the signal before the answer was
			// lost: the task may be a member.
			return accountapi.View{}, joinedUnread(fmt.Sprintf("join account %s: no answer, the join may have gone", account), err)
		}
		return accountapi.View{}, fmt.Errorf("join account %s: %w", account, err)
	}
	v, err := a.readJoined(ctx, account)
	if err != nil {
		return accountapi.View{}, joinedUnread(fmt.Sprintf("joined account %s, its pause not read", account), err)
	}
	return v, nil
}

// joinedUnread marks err as a join's that may have made the task a
// member: retryable, as a join sent again is the same join.
func joinedUnread(what string, err error) error {
	return temporal.NewApplicationErrorWithCause(fmt.Sprintf("%s: %v", what, err), ErrJoinedUnread, err)
}

// readJoined reads the account's pause for a join whose signal went.
func (a *Activities) readJoined(ctx context.Context, account string) (accountapi.View, error) {
	v, inMemo, err := a.pauses.readFresh(ctx, account, a.Scale.Of(pauseFresh), func(ctx context.Context) (accountapi.View, bool, error) {
		return a.readMemo(ctx, account)
	})
	if err != nil {
		return accountapi.View{}, err
	}
	if inMemo {
		v.Paused = v.PausedUntil.After(time.Now())
		return v, nil
	}
	// A workflow that has not finished its first workflow task answers no
	// query yet.
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		view, err := a.accounts(ctx).View(ctx, account)
		if err == nil {
			return view, nil
		}
		var notReady *serviceerror.WorkflowNotReady
		if !errors.As(err, &notReady) {
			return accountapi.View{}, fmt.Errorf("read account %s: %w", account, err)
		}
		select {
		case <-ctx.Done():
			return accountapi.View{}, fmt.Errorf("read account %s: %w", account, ctx.Err())
		case <-time.After(backoff):
		}
	}
}
