package accountapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/internal/timescale"
)

// The account wing's activity a task workflow calls by name, and the
// error types its callers tell apart. The activity's name is the method's
// the worker registers (accountact.Activities.AccountUpdate): it never
// changes.
const (
	// ActivityAccountUpdate takes an AccountRequest and answers a View.
	ActivityAccountUpdate = "AccountUpdate"
	// ErrBadAccount: an account key or request the account refused.
	// Retrying cannot help.
	ErrBadAccount = "BadAccount"
	// ErrJoinedUnread: the join's signal went to the account (or ran out
	// of time on the way, and may have), but the account's pause could
	// not be read. The task is, or may be, a member: it must leave at the
	// end. The account tells a member that joins while it is paused so
	// (SignalJoin), so the pause is not lost either.
	ErrJoinedUnread = "JoinedUnread"
)

// AccountRequest is one update to an agent account's workflow: join
// (Join set), a usage limit (Limit set) or a resume (Resume set).
type AccountRequest struct {
	Account string         `json:"account"`
	Join    *JoinRequest   `json:"join,omitempty"`
	Limit   *LimitRequest  `json:"limit,omitempty"`
	Resume  *ResumeRequest `json:"resume,omitempty"`
	// UpdateID makes a retried activity answered from the first update.
	UpdateID string `json:"updateId,omitempty"`
}

// JoinedUnread says whether err is a join's that may have made the task a
// member though it returned no view (ErrJoinedUnread).
func JoinedUnread(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == ErrJoinedUnread
}

// Joins makes tasks members of their accounts for one worker, and reads
// the accounts' pauses, sharing each read among the joins of the worker
// that come within a moment of it (pauseFresh). One per worker; its zero
// value with a Client is ready.
type Joins struct {
	Client Temporal
	// Scale divides how long a read of an account's pause is shared: the
	// worker's time scale.
	Scale timescale.Scale

	pauses pauseReads
}

// Join makes a task (r.Member, its workflow id) a member of account by
// signal, starting the account's workflow on taskQueue if it does not
// run, then reads the account's pause from its memo (MemoPause) with a
// describe the server answers alone. Both scale: a server admits only a
// few updates in flight per workflow, every task of a queue joins its
// worker's account, many at once, and a query would wait for the
// account's worker behind every other join. Should the account pause
// between the read and the join's taking effect, the account sends the
// new member the pause (SignalJoin). An account run started before the
// memo kept the pause is read by query. A join that may have made the
// task a member without reading the pause fails with ErrJoinedUnread,
// for the task to leave all the same.
func (j *Joins) Join(ctx context.Context, taskQueue, account string, r JoinRequest) (View, error) {
	if err := ValidName(account); err != nil {
		return View{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadAccount, err)
	}
	if r.Member == "" {
		return View{}, temporal.NewNonRetryableApplicationError(
			"join needs the member's workflow id", ErrBadAccount, nil)
	}
	accounts := Accounts{Client: j.Client, TaskQueue: taskQueue}
	if err := accounts.Join(ctx, account, r); err != nil {
		if ctx.Err() != nil {
			// The server may have taken the signal before the answer was
			// lost: the task may be a member.
			return View{}, joinedUnread(fmt.Sprintf("join account %s: no answer, the join may have gone", account), err)
		}
		return View{}, fmt.Errorf("join account %s: %w", account, err)
	}
	v, err := j.readJoined(ctx, accounts, account)
	if err != nil {
		return View{}, joinedUnread(fmt.Sprintf("joined account %s, its pause not read", account), err)
	}
	return v, nil
}

// Leave tells account that member no longer runs on it. An account not
// running has nobody to drop.
func (j *Joins) Leave(ctx context.Context, account, member string) error {
	err := Accounts{Client: j.Client}.Leave(ctx, account, member)
	var gone *serviceerror.NotFound
	if errors.As(err, &gone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("leave account %s: %w", account, err)
	}
	return nil
}

// joinedUnread marks err as a join's that may have made the task a
// member: retryable, as a join sent again is the same join.
func joinedUnread(what string, err error) error {
	return temporal.NewApplicationErrorWithCause(fmt.Sprintf("%s: %v", what, err), ErrJoinedUnread, err)
}

// readMemo reads the account's pause from its memo: inMemo is false for an
// account run from before the memo kept it.
func readMemo(ctx context.Context, accounts Accounts, account string) (v View, inMemo bool, err error) {
	desc, err := accounts.Describe(ctx, account)
	if err != nil {
		return View{}, false, fmt.Errorf("read account %s: %w", account, err)
	}
	if _, ok := desc.Memo.GetFields()[MemoPause]; !ok {
		return View{}, false, nil
	}
	if err := desc.GetMemoValue(MemoPause, &v); err != nil {
		return View{}, false, fmt.Errorf("read account %s's pause: %w", account, err)
	}
	return v, true, nil
}

// readJoined reads the account's pause for a join whose signal went.
func (j *Joins) readJoined(ctx context.Context, accounts Accounts, account string) (View, error) {
	v, inMemo, err := j.pauses.readFresh(ctx, account, j.Scale.Of(pauseFresh), func(ctx context.Context) (View, bool, error) {
		return readMemo(ctx, accounts, account)
	})
	if err != nil {
		return View{}, err
	}
	if inMemo {
		v.Paused = v.PausedUntil.After(time.Now())
		return v, nil
	}
	// A workflow that has not finished its first workflow task answers no
	// query yet.
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		view, err := accounts.View(ctx, account)
		if err == nil {
			return view, nil
		}
		var notReady *serviceerror.WorkflowNotReady
		if !errors.As(err, &notReady) {
			return View{}, fmt.Errorf("read account %s: %w", account, err)
		}
		select {
		case <-ctx.Done():
			return View{}, fmt.Errorf("read account %s: %w", account, ctx.Err())
		case <-time.After(backoff):
		}
	}
}
