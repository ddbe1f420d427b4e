package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
)

// accountOpts: the account to show.
type accountOpts struct {
	account string
	jsonOpts
}

func (o *accountOpts) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.account, "account", "", "agent `account` (default default.<task-queue>, the account the workers of the queue give tasks that name none)")
	o.jsonOpts.flags(fs)
}

// accountResumeOpts: the account to resume.
type accountResumeOpts struct {
	accountOpts
	reasonOpts
}

func (o *accountResumeOpts) flags(fs *flag.FlagSet) {
	o.accountOpts.flags(fs)
	o.reasonOpts.flags(fs)
}

// accountOrDefault is the account asked for, else the task queue's
// default one (the worker's -account when it sets none).
func accountOrDefault(account, queue string) string {
	if account == "" {
		return accountapi.QueueAccount(queue)
	}
	return account
}

func accountCmd(e *env, cl client.Client, o *accountOpts) error {
	o.account = accountOrDefault(o.account, e.queue)
	if err := accountapi.ValidName(o.account); err != nil {
		return &usageError{msg: err.Error()}
	}
	view, err := accountapi.Accounts{Client: cl}.View(e.ctx, o.account)
	if err != nil {
		return fmt.Errorf("account %s: %w", o.account, err)
	}
	return printAccount(e.stdout, view, o.json)
}

func accountResumeCmd(e *env, cl client.Client, o *accountResumeOpts) error {
	o.account = accountOrDefault(o.account, e.queue)
	if err := accountapi.ValidName(o.account); err != nil {
		return &usageError{msg: err.Error()}
	}
	view, err := resumeAccount(e.ctx, cl, e.queue, o.account, o.reason)
	if err != nil {
		return err
	}
	return printAccount(e.stdout, view, o.json)
}

// resumeAccount ends the account's pause; every task paused for it
// resumes.
func resumeAccount(ctx context.Context, cl client.Client, taskQueue, account, reason string) (accountapi.View, error) {
	view, err := accountapi.Accounts{Client: cl, TaskQueue: taskQueue}.Resume(ctx, account, reason)
	if err != nil {
		return view, fmt.Errorf("account %s: resume: %w", account, err)
	}
	return view, nil
}

func printAccount(w io.Writer, v accountapi.View, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	state := "not paused"
	if v.Paused {
		state = fmt.Sprintf("paused until %s UTC (usage limit met by task %s in phase %s)", v.PausedUntil.UTC().Format(time.DateTime), v.By, v.Phase)
	}
	fmt.Fprintf(w, "account %s: %s; %d pauses; members: %s\n", v.Account, state, v.Pauses, strings.Join(v.Members, " "))
	return nil
}

// budgetSetCmd sets a running task's budget; a task paused for its budget
// resumes when the new one is not spent. The budget is checked before
// Temporal is dialled.
func budgetSetCmd(e *env, o *budgetChangeOpts) error {
	b := costs.Budget{LimitUSD: o.usd, Action: costs.Action(o.action)}
	if b.Action == "" {
		b.Action = costs.Warn // only to check the amount
	}
	if err := b.Validate(); err != nil {
		return &usageError{msg: err.Error()}
	}
	cl, err := e.client()
	if err != nil {
		return err
	}
	return signalTask(e.ctx, cl, e.inv.arg, taskapi.SignalBudget,
		taskapi.BudgetSignal{LimitUSD: o.usd, Action: costs.Action(o.action)}, e.stdout)
}
