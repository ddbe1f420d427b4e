package accountflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/account"
)

// AccountWorkflow keeps one agent account's pause: a small entity
// workflow, started on demand by the first task that joins it and running
// until terminated, continuing-as-new with its state. Tasks join it before
// each attempt (and learn whether the account is paused); a task that
// meets a usage limit reports it, and the account tells every other member
// to pause until the same moment. The pause lives here, in Temporal, so a
// worker killed meanwhile changes nothing: a task started on the account
// before the reset learns of it when it joins.
func AccountWorkflow(ctx workflow.Context, in accountapi.Input) error {
	if err := accountapi.ValidName(in.Account); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "BadAccount", err)
	}
	a := &accountFlow{ctx: ctx, log: workflow.GetLogger(ctx), in: in}
	if len(in.Resume) > 0 {
		if err := json.Unmarshal(in.Resume, &a.st); err != nil {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("account state handed over by continue-as-new: %v", err), "BadState", err)
		}
	}
	a.st.Account = in.Account
	if err := a.setup(); err != nil {
		return err
	}
	// Histories recorded before the pause was kept in the memo replay
	// without it.
	a.memo = workflow.GetVersion(ctx, versionPauseMemo, workflow.DefaultVersion, 1) == 1
	if err := a.publish(ctx); err != nil {
		return err
	}
	return a.loop()
}

// publish writes the pause to the memo, where joining workers read it.
func (a *accountFlow) publish(ctx workflow.Context) error {
	if !a.memo {
		return nil
	}
	v := a.view()
	v.Members = nil
	if err := workflow.UpsertMemo(ctx, map[string]any{accountapi.MemoPause: v}); err != nil {
		return fmt.Errorf("publish the pause of account %s: %w", a.st.Account, err)
	}
	return nil
}

// defaultAccountContinueAsNewAfter bounds an account's history: each
// request costs a few events, a limit one more per member.
const defaultAccountContinueAsNewAfter = 500

type accountState struct {
	Account     string    `json:"account"`
	PausedUntil time.Time `json:"pausedUntil,omitzero"`
	ResetAt     time.Time `json:"resetAt,omitzero"`
	By          string    `json:"by,omitempty"`
	Phase       string    `json:"phase,omitempty"`
	Source      string    `json:"source,omitempty"`
	Text        string    `json:"text,omitempty"`
	Pauses      int       `json:"pauses,omitempty"`
	// Members are the task workflow ids, sorted.
	Members []string `json:"members,omitempty"`
}

type accountFlow struct {
	ctx     workflow.Context
	log     log.Logger
	in      accountapi.Input
	st      accountState
	handled int
	// memo: the pause is kept in the memo too (versionPauseMemo).
	memo bool
}

func (a *accountFlow) setup() error {
	if err := workflow.SetQueryHandler(a.ctx, accountapi.QueryAccount, func() (accountapi.View, error) {
		return a.view(), nil
	}); err != nil {
		return fmt.Errorf("register account query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(a.ctx, accountapi.UpdateJoin,
		func(ctx workflow.Context, r accountapi.JoinRequest) (accountapi.View, error) {
			a.handled++
			a.join(r.Member)
			return a.view(), nil
		}, workflow.UpdateHandlerOptions{
			Validator: func(r accountapi.JoinRequest) error {
				if r.Member == "" {
					return fmt.Errorf("join needs the member's workflow id")
				}
				return nil
			},
			Description: `{"member"}: the task hears of the account's pauses; answers whether it is paused`,
		}); err != nil {
		return fmt.Errorf("register join update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(a.ctx, accountapi.UpdateLimit,
		func(ctx workflow.Context, r accountapi.LimitRequest) (accountapi.View, error) {
			a.handled++
			a.join(r.Member)
			a.limit(ctx, r)
			return a.view(), nil
		}, workflow.UpdateHandlerOptions{
			Validator: func(r accountapi.LimitRequest) error {
				if r.Until.IsZero() {
					return fmt.Errorf("a limit needs the time the account works again (until)")
				}
				return nil
			},
			Description: `{"member", "until", ...}: a member met a usage limit; every member pauses until then`,
		}); err != nil {
		return fmt.Errorf("register limit update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(a.ctx, accountapi.UpdateResume,
		func(ctx workflow.Context, r accountapi.ResumeRequest) (accountapi.View, error) {
			a.handled++
			a.resume(ctx, r)
			return a.view(), nil
		}, workflow.UpdateHandlerOptions{
			Description: `{"reason"}: the account's pause ends now; every member paused resumes`,
		}); err != nil {
		return fmt.Errorf("register resume update: %w", err)
	}
	return nil
}

func (a *accountFlow) join(member string) {
	if member == "" {
		return
	}
	if i, found := slices.BinarySearch(a.st.Members, member); !found {
		a.st.Members = slices.Insert(a.st.Members, i, member)
	}
}

func (a *accountFlow) leave(member string) {
	if i, found := slices.BinarySearch(a.st.Members, member); found {
		a.st.Members = slices.Delete(a.st.Members, i, i+1)
	}
}

// limit pauses the account until r.Until (a later pause extends it) and
// tells every other member.
func (a *accountFlow) limit(ctx workflow.Context, r accountapi.LimitRequest) {
	now := workflow.Now(ctx)
	if !r.Until.After(a.st.PausedUntil) || !r.Until.After(now) {
		return // already paused at least as long: the members know
	}
	if !a.st.PausedUntil.After(now) {
		a.st.Pauses++
	}
	a.st.PausedUntil, a.st.ResetAt, a.st.Phase, a.st.Source, a.st.Text = r.Until, r.ResetAt, r.Phase, r.Source, r.Text
	a.st.By = r.Task
	if a.st.By == "" {
		a.st.By = r.Member
	}
	a.mustPublish(ctx)
	a.log.Warn("account paused", "by", a.st.By, "until", r.Until, "members", len(a.st.Members))
	a.tell(ctx, r.Member, accountapi.Notice{Account: a.st.Account, Until: r.Until, ResetAt: r.ResetAt,
		By: a.st.By, Phase: r.Phase, Source: r.Source, Text: r.Text})
}

// resume ends the account's pause and tells every member.
func (a *accountFlow) resume(ctx workflow.Context, r accountapi.ResumeRequest) {
	a.st.PausedUntil = time.Time{}
	a.mustPublish(ctx)
	reason := r.Reason
	if reason == "" {
		reason = "the account was resumed"
	}
	a.log.Info("account resumed", "reason", reason)
	a.tell(ctx, "", accountapi.Notice{Account: a.st.Account, Resume: true, Reason: reason})
}

// mustPublish is publish for an update handler, which has no error to
// return but its answer: a memo the server refuses (too large) would be a
// bug in the account's own state, so it is logged, and joiners read the
// pause from the notice the account sends them.
func (a *accountFlow) mustPublish(ctx workflow.Context) {
	if err := a.publish(ctx); err != nil {
		a.log.Error("account pause not published", "error", err)
	}
}

// tell signals every member but skip; one whose workflow is gone leaves.
func (a *accountFlow) tell(ctx workflow.Context, skip string, n accountapi.Notice) {
	members := slices.Clone(a.st.Members)
	futs := make([]workflow.Future, len(members))
	for i, m := range members {
		if m != skip {
			futs[i] = workflow.SignalExternalWorkflow(ctx, m, "", accountapi.SignalNotice, n)
		}
	}
	for i, f := range futs {
		if f == nil {
			continue
		}
		if err := f.Get(ctx, nil); err != nil {
			a.log.Info("member gone; it leaves the account", "member", members[i], "error", err)
			a.leave(members[i])
		}
	}
}

func (a *accountFlow) view() accountapi.View {
	return accountapi.View{
		Account: a.st.Account, PausedUntil: a.st.PausedUntil, Paused: a.st.PausedUntil.After(workflow.Now(a.ctx)),
		ResetAt: a.st.ResetAt, By: a.st.By, Phase: a.st.Phase, Source: a.st.Source, Text: a.st.Text,
		Pauses: a.st.Pauses, Members: slices.Clone(a.st.Members),
	}
}

// joinNow makes a member that joined by signal and, when the account is
// paused, tells it so: it may be about to start a conductor on the
// strength of a query answered a moment before the pause.
func (a *accountFlow) joinNow(ctx workflow.Context, member string) {
	a.join(member)
	if member == "" || !a.st.PausedUntil.After(workflow.Now(ctx)) {
		return
	}
	n := accountapi.Notice{Account: a.st.Account, Until: a.st.PausedUntil, ResetAt: a.st.ResetAt,
		By: a.st.By, Phase: a.st.Phase, Source: a.st.Source, Text: a.st.Text}
	if err := workflow.SignalExternalWorkflow(ctx, member, "", accountapi.SignalNotice, n).Get(ctx, nil); err != nil {
		a.log.Info("member gone; it leaves the account", "member", member, "error", err)
		a.leave(member)
	}
}

func (a *accountFlow) loop() error {
	leaveCh := workflow.GetSignalChannel(a.ctx, accountapi.SignalLeave)
	joinCh := workflow.GetSignalChannel(a.ctx, accountapi.SignalJoin)
	workflow.Go(a.ctx, func(ctx workflow.Context) {
		for {
			var r accountapi.JoinRequest
			joinCh.Receive(ctx, &r)
			a.handled++
			a.joinNow(ctx, r.Member)
		}
	})
	limit := a.in.ContinueAsNewAfter
	if limit <= 0 {
		limit = defaultAccountContinueAsNewAfter
	}
	workflow.Go(a.ctx, func(ctx workflow.Context) {
		for {
			var s accountapi.LeaveSignal
			leaveCh.Receive(ctx, &s)
			a.handled++
			a.leave(s.Member)
		}
	})
	if err := workflow.Await(a.ctx, func() bool {
		return a.handled >= limit || workflow.GetInfo(a.ctx).GetContinueAsNewSuggested()
	}); err != nil {
		return err
	}
	if err := workflow.Await(a.ctx, func() bool { return workflow.AllHandlersFinished(a.ctx) }); err != nil {
		return err
	}
	for {
		var s accountapi.LeaveSignal
		if !leaveCh.ReceiveAsync(&s) {
			break
		}
		a.leave(s.Member)
	}
	for {
		var r accountapi.JoinRequest
		if !joinCh.ReceiveAsync(&r) {
			break
		}
		a.joinNow(a.ctx, r.Member)
	}
	data, err := json.Marshal(a.st)
	if err != nil {
		return fmt.Errorf("hand over the account state: %w", err)
	}
	return workflow.NewContinueAsNewError(a.ctx, accountapi.WorkflowName,
		accountapi.Input{Account: a.st.Account, ContinueAsNewAfter: a.in.ContinueAsNewAfter, Resume: data})
}
