package accountact

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/internal/timescale"
)

// Client is the part of a Temporal client the account activities need.
type Client = accountapi.Temporal

// Activities reach an agent account's workflow for a task workflow, which
// cannot send an update itself.
type Activities struct {
	Temporal Client
	// Joins makes the joins the activities are asked for; the worker
	// shares it with the task activities, which join at a claim, so both
	// share the reads of an account's pause. Nil: one of the activities'
	// own, on Temporal at Scale.
	Joins *accountapi.Joins
	// Scale is the worker's time scale, for Joins when nil.
	Scale timescale.Scale

	once  sync.Once
	joins *accountapi.Joins
}

// accounts is the accounts' client of an activity: an account it starts
// runs on the activity's task queue.
func (a *Activities) accounts(ctx context.Context) accountapi.Accounts {
	return accountapi.Accounts{Client: a.Temporal, TaskQueue: activity.GetInfo(ctx).TaskQueue}
}

func (a *Activities) joinsOf() *accountapi.Joins {
	a.once.Do(func() {
		a.joins = a.Joins
		if a.joins == nil {
			a.joins = &accountapi.Joins{Client: a.Temporal, Scale: a.Scale}
		}
	})
	return a.joins
}

// ErrBadAccount is accountapi's: the callers' workflows tell it apart.
const ErrBadAccount = accountapi.ErrBadAccount

// AccountRequest is accountapi's: a task workflow sends it.
type AccountRequest = accountapi.AccountRequest

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
		return a.joinsOf().Join(ctx, activity.GetInfo(ctx).TaskQueue, req.Account, *req.Join)
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
