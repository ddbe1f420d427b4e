package taskflow

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/mapping"
)

// Between two deliveries the workflow owns the brief (no tail is writing
// it), so that is where what the bridge itself has to say goes: notes
// signalled by the task's run (a budget warning), the spending reported to
// the run, and the task's own budget, checked against what its attempts
// spent. A task started without a budget, a run to report to or a note
// does none of this, and records nothing more in history.

// BudgetState is how far the task's budget has been acted on.
type BudgetState struct {
	Budget *costs.Budget `json:"budget,omitempty"`
	Level  costs.Level   `json:"level,omitempty"`
	// ReportSpend: tell the run (the parent) what the attempt spent;
	// Reported is the last amount told, per attempt.
	ReportSpend bool    `json:"reportSpend,omitempty"`
	Reported    float64 `json:"reported,omitempty"`
	ReportedN   int     `json:"reportedN,omitempty"`
	// Notes wait for the next point between deliveries.
	Notes []taskapi.NoteSignal `json:"notes,omitempty"`
	// Acked is what the task had spent when a person resumed it from a
	// budget pause: the spent budget acts again only past it.
	Acked float64 `json:"acked,omitempty"`
}

// listenForNotes makes the notes the task's run sends reach the state:
// read where they are applied and before continue-as-new (takeNotes), or,
// in histories recorded before that, queued by a coroutine.
func (r *taskRun) listenForNotes() {
	r.noteCh = workflow.GetSignalChannel(r.ctx, taskapi.SignalNote)
	if workflow.GetVersion(r.ctx, versionNotesInline, workflow.DefaultVersion, 1) >= 1 {
		r.notesInline = true
		return
	}
	workflow.Go(r.ctx, func(gctx workflow.Context) {
		for {
			var n taskapi.NoteSignal
			r.noteCh.Receive(gctx, &n)
			r.st.Budget.Notes = append(r.st.Budget.Notes, n)
		}
	})
}

// takeNotes queues the notes delivered so far, without blocking.
func (r *taskRun) takeNotes() {
	if !r.notesInline {
		return
	}
	for {
		var n taskapi.NoteSignal
		if !r.noteCh.ReceiveAsync(&n) {
			return
		}
		r.st.Budget.Notes = append(r.st.Budget.Notes, n)
	}
}

// betweenDeliveries runs at a checkpoint that did not end the attempt.
// It returns true when the budget ended the attempt.
func (r *taskRun) betweenDeliveries() (bool, error) {
	r.applyNotes()
	r.reportSpend()
	return r.checkTaskBudget()
}

func (r *taskRun) applyNotes() {
	r.takeNotes()
	b := &r.st.Budget
	if len(b.Notes) == 0 {
		return
	}
	a := &r.st.Current
	at := workflow.Now(r.ctx).UTC().Format(time.RFC3339)
	var patches []mapping.Patch
	for _, n := range b.Notes {
		c := a.Brief.Note(at, n.Action, n.Detail)
		patches = append(patches, r.enc.Patch(&a.Brief, c))
		r.step(canonical.Step{Kind: canonical.StepNote, Status: n.Action, Reason: n.Detail})
	}
	b.Notes = nil
	r.sendPatches(patches)
}

// checksSpend says whether the workflow checks what the task spends as it
// goes (a budget of its own, or its run's): its deliveries then read the
// conductor's spend at every phase boundary.
func (r *taskRun) checksSpend() bool {
	return r.st.Budget.Budget != nil || r.st.Budget.ReportSpend
}

// taskSpent is what every attempt of the task spent, the current included.
func (r *taskRun) taskSpent() float64 {
	return r.st.finishedSpent(r.st.Current.ownSpent(), r.st.Current.N)
}

// reportSpend tells the run what the current attempt has spent, when it
// asked and the amount grew.
func (r *taskRun) reportSpend() {
	b := &r.st.Budget
	parent := workflow.GetInfo(r.ctx).ParentWorkflowExecution
	if !b.ReportSpend || parent == nil {
		return
	}
	a := &r.st.Current
	now := spent(a.Brief)
	if b.ReportedN == a.N && now <= b.Reported {
		return
	}
	err := workflow.SignalExternalWorkflow(r.ctx, parent.ID, "", taskapi.SignalTaskSpend,
		taskapi.TaskSpend{Task: r.st.Dispatch.TaskID, Attempt: a.N, CostUSD: now}).Get(r.ctx, nil)
	if err != nil {
		r.log.Warn("spending not reported to the run", "error", err)
		return
	}
	b.Reported, b.ReportedN = now, a.N
}

// checkTaskBudget notes a warning at 80 % of the task's budget, once, and
// at 100 % notes it or, for a block budget, stops the conductor: the
// attempt ends blocked, "Budget exceeded ($X spent of $Y)".
func (r *taskRun) checkTaskBudget() (bool, error) {
	b := &r.st.Budget
	r.takeBudgetSignals()
	if b.Budget == nil {
		return false, nil
	}
	total := r.taskSpent()
	level := b.Budget.Level(total)
	if level <= b.Level || (level == costs.Spent && total <= b.Acked) {
		return false, nil
	}
	b.Level = level
	if level == costs.Warning {
		b.Notes = append(b.Notes, taskapi.NoteSignal{Action: "budget", Detail: b.Budget.WarningMessage(total)})
		r.applyNotes()
		return false, nil
	}
	if b.Budget.Action == costs.Warn {
		b.Notes = append(b.Notes, taskapi.NoteSignal{Action: "budget",
			Detail: b.Budget.ExceededMessage(total) + " (budget action warn: the task goes on)"})
		r.applyNotes()
		return false, nil
	}
	if b.Budget.Action == costs.Pause {
		return r.pauseForBudget(total)
	}
	r.log.Warn("task budget spent: stopping the conductor", "spent", total, "limit", b.Budget.LimitUSD)
	completed, err := r.stopConductor()
	if err != nil {
		return false, err
	}
	limit := b.Budget.LimitUSD
	o := mapping.BudgetOutcome(r.taskSpent(), &limit)
	if completed != nil {
		o = *completed // the plan finished before it could be stopped
	}
	r.decide(o)
	return true, nil
}

// budgetSpentAtStart ends an attempt before it starts when the task's
// blocking budget is spent already: a redispatch that came while the
// attempt the budget blocked was ending would otherwise run a conductor
// that no checkpoint stops, the budget having acted once. A raised budget
// (starter budget set) is what lets the task run again.
func (r *taskRun) budgetSpentAtStart() bool {
	b := r.st.Budget.Budget
	if b == nil || b.Action != costs.Block {
		return false
	}
	total := r.taskSpent()
	if b.Level(total) < costs.Spent || total <= r.st.Budget.Acked {
		return false
	}
	if workflow.GetVersion(r.ctx, versionBudgetSpentNoAttempt, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	r.log.Warn("task budget spent: the attempt does not start", "attempt", r.st.Current.N, "spent", total, "limit", b.LimitUSD)
	limit := b.LimitUSD
	r.decide(mapping.BudgetOutcome(total, &limit))
	return true
}

// cost answers the cost query. Finished attempts count by their totals;
// the current one, still running or the last, by phase.
func (r *taskRun) cost() taskapi.Cost {
	d := r.st.Dispatch
	model := ""
	if d.ModelHint != nil {
		model = *d.ModelHint
	}
	var sum costs.Summary
	cur := r.st.Current
	if e := r.st.Earlier; e.CostUSD > 0 {
		_ = sum.Add(costs.Spend{Task: d.TaskID, Model: model, Skill: d.Skill, TotalUSD: e.CostUSD})
	}
	for _, f := range r.st.Finished {
		if f.Attempt == cur.N || f.CostUSD == nil {
			continue
		}
		_ = sum.Add(costs.Spend{Task: d.TaskID, Model: model, Skill: d.Skill, TotalUSD: *f.CostUSD})
	}
	if cur.Plan != nil {
		_ = sum.Add(costs.Spend{Task: d.TaskID, Model: model, Skill: d.Skill,
			ByPhase: cur.Brief.Brief.Cost.ByPhase, TotalUSD: cur.ownSpent()})
	}
	c := taskapi.Cost{TaskID: d.TaskID, Summary: sum, Budget: r.st.Budget.Budget}
	if b := r.st.Budget.Budget; b != nil {
		c.Level = b.Level(sum.TotalUSD).String()
	}
	return c
}

// pauseForBudget stops the conductor gracefully and pauses the task, with
// no end of its own: a raised budget (starter budget set) or a resume
// signal ends it, and the same plan goes on with its passed phases kept.
func (r *taskRun) pauseForBudget(total float64) (bool, error) {
	b := &r.st.Budget
	a := &r.st.Current
	r.log.Warn("task budget spent: pausing the task", "spent", total, "limit", b.Budget.LimitUSD)
	if lost, err := r.interruptAndDrain("budget spent"); lost || err != nil {
		return lost, err
	}
	if a.Outcome != nil && a.Outcome.TaskStatus == mapping.TaskCompleted {
		a.Stage = taskapi.StageFinish // the plan finished before it could be stopped
		return true, nil
	}
	a.Outcome, a.Conductor, a.Drained, a.FinalState, a.Stopped = nil, nil, false, nil, false
	r.st.Pauses++
	r.enterPause(&taskapi.Pause{Reason: taskapi.PausedBudget, Phase: r.currentPhase(),
		Since: workflow.Now(r.ctx), Count: r.st.Pauses, Budget: b.Budget.ExceededMessage(r.taskSpent())})
	return true, nil
}

// takeBudgetSignals applies the budgets set so far, without blocking.
func (r *taskRun) takeBudgetSignals() {
	ch := workflow.GetSignalChannel(r.ctx, taskapi.SignalBudget)
	for {
		var s taskapi.BudgetSignal
		if !ch.ReceiveAsync(&s) {
			return
		}
		r.setBudget(s)
	}
}

// setBudget takes a new budget: the level is where the task's spending
// stands against it, so a raised budget warns or acts again when reached.
// A bad one is logged and ignored (the starter checks it first).
func (r *taskRun) setBudget(s taskapi.BudgetSignal) {
	b := &r.st.Budget
	nb := costs.Budget{LimitUSD: s.LimitUSD, Action: s.Action}
	if nb.Action == "" {
		nb.Action = costs.Block
		if b.Budget != nil {
			nb.Action = b.Budget.Action
		}
	}
	if err := nb.Validate(); err != nil {
		r.log.Warn("budget signal ignored", "error", err)
		return
	}
	b.Budget = &nb
	b.Level = min(b.Level, nb.Level(r.taskSpent()))
	b.Acked = 0 // a new budget acts from where the spending stands
	r.log.Info("task budget set", "limit", nb.LimitUSD, "action", nb.Action, "spent", r.taskSpent())
	r.showDetails()
}

// budgetRaised is why a budget pause ends, "" while the budget is spent.
func (r *taskRun) budgetRaised() string {
	b := r.st.Budget.Budget
	if p := r.st.Pause; p == nil || p.Reason != taskapi.PausedBudget || b == nil {
		return ""
	}
	if total := r.taskSpent(); b.Level(total) < costs.Spent {
		return fmt.Sprintf("budget raised to $%.2f ($%.2f spent)", b.LimitUSD, total)
	}
	return ""
}

// A budget pause is a person's to end: a raised budget (budgetRaised) or
// a resume signal. The agent account's notices do not end it, nor give it
// a reset to wait for: an account's pause heard meanwhile is remembered
// (rememberAccountPause), and a budget raised before that pause's end
// holds the task for the account instead of resuming its conductor into
// the limit; the account's resume forgets it. A person's resume goes on at
// once, as it ends any one task's pause, and acknowledges what was spent
// (BudgetState.Acked): the task goes on past its budget until it spends
// more than that, then pauses again at the next checkpoint that shows it.

// budgetPauseOwnsItsEnd says whether this workflow ends a budget pause
// only on a raised budget or a resume (versionBudgetPauseEnds). Asked
// only where a budget pause meets an account's notice or a resume.
func (r *taskRun) budgetPauseOwnsItsEnd() bool {
	return workflow.GetVersion(r.ctx, versionBudgetPauseEnds, workflow.DefaultVersion, 1) >= 1
}

// rememberAccountPause keeps the later of the account's pauses heard
// during a budget pause; the account's resume forgets them.
func (r *taskRun) rememberAccountPause(n accountapi.Notice) {
	switch {
	case n.Resume:
		r.st.AccountPause = nil
		r.log.Info("account resumed; the task still waits for its budget", "account", n.Account)
	case r.st.AccountPause == nil || n.Until.After(r.st.AccountPause.Until):
		r.st.AccountPause = &n
		r.log.Info("account paused; the task still waits for its budget", "account", n.Account, "until", n.Until)
	}
}

// endBudgetPause acts on the end of a budget pause, before the task
// resumes. A person's resume acknowledges what was spent; a raised budget
// while the account is still paused holds the task for the account
// (held: the task is paused again, until the account's moment).
func (r *taskRun) endBudgetPause(why string, byPerson bool) (held bool) {
	acct := r.st.AccountPause
	r.st.AccountPause = nil
	if byPerson {
		if r.budgetPauseOwnsItsEnd() {
			b := &r.st.Budget
			b.Acked = r.taskSpent()
			// Below Spent, so that more spending acts again; the
			// warning, given once, is not given again.
			b.Level = min(b.Level, costs.Warning)
			r.log.Info("budget pause resumed by a person: the spending so far acknowledged", "spent", b.Acked)
		}
		return false
	}
	if acct == nil || !acct.Until.After(workflow.Now(r.ctx)) {
		return false
	}
	p := r.st.Pause
	r.log.Info("budget raised while the account is paused: the task waits for the account", "why", why,
		"account", acct.Account, "until", acct.Until)
	r.st.Pauses++
	r.enterPause(&taskapi.Pause{
		Reason: taskapi.PausedUsageLimit, Phase: p.Phase, Since: workflow.Now(r.ctx), Until: acct.Until,
		ResetAt: acct.ResetAt, Source: acct.Source, Text: acct.Text, Count: r.st.Pauses,
		Account: r.accountKey(), By: acct.By,
	})
	return true
}

// addBudgetReceivers: a pause also hears of a new budget; a budget pause
// ends when the budget is no longer spent.
func (r *taskRun) addBudgetReceivers(sel workflow.Selector, reason *string) {
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, taskapi.SignalBudget), func(c workflow.ReceiveChannel, _ bool) {
		var s taskapi.BudgetSignal
		c.Receive(r.ctx, &s)
		r.setBudget(s)
		*reason = r.budgetRaised()
	})
}
