package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/slots"
	"karvi-edda-temporal/soak"
	"karvi-edda-temporal/testkit/karvifake"
)

// Task origins.
const (
	originStandalone = "standalone"
	originRun        = "run"
	originBoard      = "board"
)

// tracked is a task the soak started or put on the board.
type tracked struct {
	id     string
	origin string
	run    string
	// board: the task is on karvi's board for the intake (a board task,
	// or a standalone one whose id the board reused).
	board bool
	// started is closed once the start step is done (or failed: err).
	started chan struct{}
	err     error
}

// onBoard reports whether a task is on karvi's board for the intake.
func (d *driver) onBoard(t *tracked) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return t.board
}

// driver plays a mix on a stack.
type driver struct {
	*stack
	mix soak.Mix
	t0  time.Time

	mu    sync.Mutex
	tasks map[string]*tracked
	order []string
	runs  []string
	steps sync.WaitGroup
	// ended is how every workflow stood at the end, by workflow id.
	ended map[string]enumspb.WorkflowExecutionStatus
	// watch tells the checks to follow a task from now on.
	watch func(task string)
	// failed counts steps the driver could not carry out (the system
	// refused or was down for too long): reported, never a violation.
	failed int
}

func newDriver(s *stack, mix soak.Mix) *driver {
	d := &driver{stack: s, mix: mix, tasks: map[string]*tracked{}, watch: func(string) {}}
	// Every task the mix names is known up front, so a step about a task
	// whose start is late waits for it rather than failing.
	for _, st := range mix.Steps {
		switch st.Kind {
		case soak.StepStartTask:
			d.track(st.Spec.ID, originStandalone, "")
		case soak.StepBoardTask:
			d.track(st.Spec.ID, originBoard, "")
			d.tasks[st.Spec.ID].board = true
		case soak.StepStartRun:
			d.runs = append(d.runs, st.Run)
			for _, t := range st.RunSpec.Tasks {
				d.track(t.Spec.ID, originRun, st.Run)
			}
		}
	}
	return d
}

func (d *driver) track(id, origin, run string) {
	d.tasks[id] = &tracked{id: id, origin: origin, run: run, started: make(chan struct{})}
	d.order = append(d.order, id)
}

// play carries out every step at its time after d.t0, each in its own goroutine so a
// slow one (a restart) holds up nothing else, and returns when all are
// done.
func (d *driver) play(ctx context.Context) {
	for _, st := range d.mix.Steps {
		select {
		case <-ctx.Done():
			d.steps.Wait()
			return
		case <-time.After(time.Until(d.t0.Add(st.At))):
		}
		d.steps.Add(1)
		go func() {
			defer d.steps.Done()
			if err := d.do(ctx, st); err != nil {
				d.mu.Lock()
				d.failed++
				d.mu.Unlock()
				d.logf("step %s %s%s at %s: %v", st.Kind, st.Task, st.Run, st.At, err)
				d.record(soak.Record{Kind: soak.RecNote, Task: st.Task, Run: st.Run,
					Details: map[string]string{"step": string(st.Kind), "failed": err.Error()}})
			}
		}()
	}
	d.steps.Wait()
}

// waitStarted waits for a task's start step; a step about a task that
// never started has nothing to act on.
func (d *driver) waitStarted(ctx context.Context, id string) error {
	t := d.tasks[id]
	if t == nil {
		return fmt.Errorf("task %s is not in the mix", id)
	}
	select {
	case <-t.started:
		if t.err != nil {
			return fmt.Errorf("task %s did not start: %w", id, t.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *driver) do(ctx context.Context, st soak.Step) error {
	d.logf("step %s task=%s run=%s host=%s account=%s at %s", st.Kind, st.Task, st.Run, st.Host, st.Account, st.At)
	switch st.Kind {
	case soak.StepStartTask:
		t := d.tasks[st.Task]
		t.err = d.startTask(ctx, *st.Spec)
		close(t.started)
		return t.err
	case soak.StepStartRun:
		err := d.startRun(ctx, *st.RunSpec)
		for _, rt := range st.RunSpec.Tasks {
			t := d.tasks[rt.Spec.ID]
			t.err = err
			close(t.started)
		}
		return err
	case soak.StepBoardTask:
		t := d.tasks[st.Task]
		t.err = d.boardTask(*st.Spec)
		close(t.started)
		return t.err
	case soak.StepAbort, soak.StepRedispatch, soak.StepResume, soak.StepBudgetRaise:
		if err := d.waitStarted(ctx, st.Task); err != nil {
			return err
		}
		return d.signalTask(ctx, st)
	case soak.StepRunBudgetRaise:
		return d.raiseRunBudget(ctx, st)
	case soak.StepAccountResume:
		return d.resumeAccount(ctx, st.Account)
	case soak.StepPoolLimit:
		return d.setPool(ctx, st.Pool, st.Count)
	case soak.StepBoardReuse:
		if err := d.waitStarted(ctx, st.Task); err != nil {
			return err
		}
		if ws, found := d.workflowStatus(ctx, taskapi.WorkflowID(st.Task)); !found || ws == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			// Only an id whose workflow ended is reused: karvi reuses the
			// ids of tasks it deleted.
			d.record(soak.Record{Kind: soak.RecNote, Task: st.Task, Details: map[string]string{"step": string(st.Kind), "skipped": "the task's workflow had not ended"}})
			return nil
		}
		d.mu.Lock()
		d.tasks[st.Task].board = true
		d.mu.Unlock()
		return d.boardTask(*st.Spec)
	case soak.StepBoardCancel, soak.StepBoardSendBack:
		if err := d.waitStarted(ctx, st.Task); err != nil {
			return err
		}
		return d.boardAction(st)
	case soak.StepKillWorker:
		return d.killWorker(st.Host)
	case soak.StepRestartWorker:
		return d.startWorker(st.Host)
	case soak.StepKarvi429:
		d.karvi.FailNext(st.Count, 429)
		d.record(soak.Record{Kind: soak.RecKarviFault, Details: map[string]string{"status": "429", "count": strconv.Itoa(st.Count)}})
		return nil
	case soak.StepKarviConflict:
		for i := range st.Count {
			status := 400
			if i%2 == 1 {
				status = 503
			}
			if err := d.karvi.InjectConflict(karvifake.Conflict{Nth: 1, Status: status}); err != nil {
				return err
			}
		}
		d.record(soak.Record{Kind: soak.RecKarviFault, Details: map[string]string{"status": "409", "count": strconv.Itoa(st.Count)}})
		return nil
	case soak.StepKarviRestart:
		return d.restartKarvi(ctx, st.Down)
	case soak.StepServerRestart:
		return d.restartServer(ctx)
	}
	return fmt.Errorf("unknown step kind %q", st.Kind)
}

// tuning is what every task and run is started with: the soak's time
// scale, which the workflows apply to each of their periods.
func (d *driver) tuning() *taskapi.Tuning {
	return scaledTuning(d.cfg.scale)
}

// dispatch is the DispatchPlan of a task of the mix.
func dispatch(t soak.TaskSpec) mapping.DispatchPlan {
	timeout, reviews := 600, 3
	d := mapping.DispatchPlan{
		Kind: "task_dispatch", Version: 1, PlanID: "soak-" + t.ID, TaskID: t.ID, Mode: "dispatch",
		RuntimeHint: "edda", TimeoutSec: &timeout,
		Message:          fmt.Sprintf("Soak task %s. %s", t.ID, t.Directives()),
		ControlsSnapshot: &mapping.Controls{MaxReviewAttempts: &reviews},
	}
	if t.StallAfterSec > 0 {
		s := t.StallAfterSec
		d.StallAfterSec, d.OnStall = &s, t.OnStall
	}
	return d
}

// faults journals what the mix makes a task's phases do wrong, so that a
// check can tell a fault the mix asked for from a defect.
func (d *driver) faults(t soak.TaskSpec, run string) {
	for _, p := range t.Phases {
		var kinds []string
		if p.Fail > 0 {
			kinds = append(kinds, "fail")
		}
		if p.Limit > 0 {
			kinds = append(kinds, "usage-limit")
		}
		if p.Stall > 0 {
			kinds = append(kinds, "stall")
		}
		if p.Die {
			kinds = append(kinds, "crash")
		}
		for _, k := range kinds {
			det := map[string]string{"fault": k, "phase": p.ID}
			switch k {
			case "usage-limit":
				det["resets"] = p.Limit.String()
			case "stall":
				det["stall"] = p.Stall.String()
				det["onStall"] = t.OnStall
			case "fail":
				det["tries"] = strconv.Itoa(p.Fail)
			}
			d.record(soak.Record{Kind: soak.RecFault, Task: t.ID, Run: run, Details: det})
		}
	}
}

func (d *driver) startTask(ctx context.Context, t soak.TaskSpec) error {
	if err := d.karvi.AddTask(karvifake.Task{ID: t.ID, Status: "pending", BriefPath: true, Brief: json.RawMessage(`{}`)}); err != nil {
		return err
	}
	in := taskapi.TaskInput{Dispatch: dispatch(t), Tuning: d.tuning(), Account: t.Account}
	// The account the task pauses with: its own, else its pool's, else
	// its worker's default one (docs/pauses.md).
	det := map[string]string{"account": accountapi.QueueAccount(taskapi.DefaultTaskQueue)}
	if t.Pool != "" {
		in.Slots = &taskapi.SlotRequest{Pool: t.Pool}
		det["pool"], det["account"] = t.Pool, t.Pool
	}
	if t.Account != "" {
		det["account"] = t.Account
	}
	if t.Budget != nil {
		in.Budget = &costs.Budget{LimitUSD: t.Budget.LimitUSD, Action: costs.Action(t.Budget.Action)}
		det["budgetUsd"] = strconv.FormatFloat(t.Budget.LimitUSD, 'f', 2, 64)
		det["budgetAction"] = t.Budget.Action
	}
	if t.StallAfterSec > 0 {
		det["stallAfterSec"] = strconv.Itoa(t.StallAfterSec)
		det["onStall"] = t.OnStall
	}
	d.faults(t, "")
	if err := d.startOnce(ctx, "start "+taskapi.WorkflowID(t.ID), func(ctx context.Context) error {
		_, err := taskapi.Tasks{Client: d.cl, TaskQueue: taskapi.DefaultTaskQueue}.Start(ctx, in, taskapi.StartOptions{})
		return err
	}); err != nil {
		return err
	}
	d.record(soak.Record{Kind: soak.RecTaskStart, Task: t.ID, Attempt: 1, Details: det})
	d.watch(t.ID)
	return nil
}

// startOnce starts a workflow, retrying what failed on the way; a try
// that reached the server before an error came back left the workflow
// started, which is what was asked.
func (d *driver) startOnce(ctx context.Context, what string, start func(context.Context) error) error {
	return retry(ctx, what, func(ctx context.Context) error {
		err := start(ctx)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil
		}
		return err
	})
}

// runFile is the run's document as `starter run start` takes it.
func runFile(r soak.RunSpec) ([]byte, error) {
	type task struct {
		ID          string   `json:"id"`
		Title       string   `json:"title"`
		Description string   `json:"description"`
		Depends     []string `json:"depends,omitempty"`
		RuntimeHint string   `json:"runtimeHint"`
	}
	doc := struct {
		Slug        string `json:"slug"`
		Title       string `json:"title"`
		Concurrency int    `json:"concurrency"`
		Tasks       []task `json:"tasks"`
	}{Slug: r.Slug, Title: "soak run " + r.Slug, Concurrency: r.Concurrency}
	for _, t := range r.Tasks {
		doc.Tasks = append(doc.Tasks, task{ID: t.Spec.ID, Title: "soak task " + t.Spec.ID,
			Description: t.Spec.Directives(), Depends: t.Depends, RuntimeHint: "edda"})
	}
	return json.Marshal(doc)
}

func (d *driver) startRun(ctx context.Context, r soak.RunSpec) error {
	for _, t := range r.Tasks {
		if err := d.karvi.AddTask(karvifake.Task{ID: t.Spec.ID, Status: "pending", BriefPath: true, Brief: json.RawMessage(`{}`)}); err != nil {
			return err
		}
		d.faults(t.Spec, r.Slug)
	}
	data, err := runFile(r)
	if err != nil {
		return err
	}
	in := runapi.RunInput{Run: data, Tuning: d.tuning(), Pool: r.Pool}
	det := map[string]string{"tasks": strconv.Itoa(len(r.Tasks))}
	if r.Pool != "" {
		det["pool"] = r.Pool
	}
	if r.Budget != nil {
		in.Budget = &costs.Budget{LimitUSD: r.Budget.LimitUSD, Action: costs.Action(r.Budget.Action)}
		det["budgetUsd"] = strconv.FormatFloat(r.Budget.LimitUSD, 'f', 2, 64)
		det["budgetAction"] = r.Budget.Action
	}
	if err := d.startOnce(ctx, "start "+runapi.WorkflowID(r.Slug), func(ctx context.Context) error {
		_, err := runapi.Runs{Client: d.cl, TaskQueue: taskapi.DefaultTaskQueue}.Start(ctx, in, runapi.StartOptions{})
		return err
	}); err != nil {
		return err
	}
	d.record(soak.Record{Kind: soak.RecRunStart, Run: r.Slug, Details: det})
	for _, t := range r.Tasks {
		d.watch(t.Spec.ID)
	}
	return nil
}

// boardTask puts a task on karvi's board routed to this runtime, as a
// person would through a project: dispatched, with the runtime's hint and
// no agent assignee, so the intake takes it.
func (d *driver) boardTask(t soak.TaskSpec) error {
	err := d.karvi.AddTask(karvifake.Task{ID: t.ID, Title: "soak board task " + t.ID, Status: "dispatched",
		BriefPath: true, Brief: json.RawMessage(`{}`),
		History: []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"ts":%q,"status":"dispatched","reason":"project_created"}`, time.Now().UTC().Format(time.RFC3339Nano)))},
		Fields:  map[string]any{"runtimeHint": "edda", "description": t.Directives(), "assignee": nil, "depends": []any{}}})
	if err != nil {
		return err
	}
	d.faults(t, "")
	d.record(soak.Record{Kind: soak.RecBoardAdd, Task: t.ID})
	d.watch(t.ID)
	return nil
}

func (d *driver) signalTask(ctx context.Context, st soak.Step) error {
	var (
		name    string
		payload any
		kind    soak.RecordKind
		det     = map[string]string{}
	)
	switch st.Kind {
	case soak.StepAbort:
		name, payload, kind = taskapi.SignalAbort, taskapi.AbortSignal{Reason: "soak: a person aborted it"}, soak.RecAbort
	case soak.StepRedispatch:
		name, payload, kind = taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: "soak: a person redispatched it"}, soak.RecRedispatch
	case soak.StepResume:
		name, payload, kind = taskapi.SignalResume, taskapi.ResumeSignal{Reason: "soak: a person resumed it"}, soak.RecResume
	case soak.StepBudgetRaise:
		name, payload, kind = taskapi.SignalBudget, taskapi.BudgetSignal{LimitUSD: st.BudgetUSD}, soak.RecBudgetRaise
		det["limitUsd"] = strconv.FormatFloat(st.BudgetUSD, 'f', 2, 64)
	}
	// Journalled before it is sent: a check must never see the effect
	// of a person's action before the action.
	d.record(soak.Record{Kind: kind, Task: st.Task, Details: det})
	err := retry(ctx, name+" "+st.Task, func(ctx context.Context) error {
		return taskapi.Tasks{Client: d.cl}.Signal(ctx, st.Task, "", name, payload)
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		// The task ended before the person got to it.
		d.record(soak.Record{Kind: soak.RecNote, Task: st.Task, Details: map[string]string{"step": string(st.Kind), "skipped": "the task's workflow had ended"}})
		return nil
	}
	return err
}

func (d *driver) raiseRunBudget(ctx context.Context, st soak.Step) error {
	d.record(soak.Record{Kind: soak.RecBudgetRaise, Run: st.Run, Details: map[string]string{"limitUsd": strconv.FormatFloat(st.BudgetUSD, 'f', 2, 64)}})
	err := retry(ctx, "run budget "+st.Run, func(ctx context.Context) error {
		return runapi.Runs{Client: d.cl}.Update(ctx, st.Run, runapi.UpdateBudget, runapi.BudgetRequest{LimitUSD: st.BudgetUSD})
	})
	if err != nil && !isTransient(err) {
		// The run ended, or refused: nothing for a person to raise.
		d.record(soak.Record{Kind: soak.RecNote, Run: st.Run, Details: map[string]string{"step": string(st.Kind), "skipped": err.Error()}})
		return nil
	}
	return err
}

func (d *driver) resumeAccount(ctx context.Context, account string) error {
	d.record(soak.Record{Kind: soak.RecResume, Details: map[string]string{"account": account}})
	return retry(ctx, "resume account "+account, func(ctx context.Context) error {
		_, err := accountapi.Accounts{Client: d.cl, TaskQueue: taskapi.DefaultTaskQueue}.Resume(ctx, account, "soak: a person resumed the account")
		return err
	})
}

func (d *driver) setPool(ctx context.Context, pool string, n int) error {
	d.record(soak.Record{Kind: soak.RecNote, Details: map[string]string{"step": "pool_limit", "pool": pool, "maxConcurrent": strconv.Itoa(n)}})
	return retry(ctx, "pool "+pool, func(ctx context.Context) error {
		in := slotapi.PoolInput{Pool: pool, Limits: &slots.Limits{MaxConcurrent: n}}
		_, err := slotapi.Pools{Client: d.cl, TaskQueue: taskapi.DefaultTaskQueue}.Set(ctx, in, slotapi.SetRequest{MaxConcurrent: n})
		return err
	})
}

// boardAction is a person's move on karvi's board: a cancel, or sending a
// completed task back.
func (d *driver) boardAction(st soak.Step) error {
	kt, ok := d.karvi.Task(st.Task)
	if !ok {
		return fmt.Errorf("task %s is not on the board", st.Task)
	}
	if st.Kind == soak.StepBoardCancel {
		switch kt.Status {
		case "completed", "approved", "cancelled", "reviewing", "needs_revision":
			d.record(soak.Record{Kind: soak.RecNote, Task: st.Task, Details: map[string]string{"step": string(st.Kind), "skipped": "status " + kt.Status}})
			return nil
		}
		d.record(soak.Record{Kind: soak.RecCancel, Task: st.Task, Details: map[string]string{"from": kt.Status}})
		return d.karvi.SetStatus(st.Task, "cancelled", "soak: a person cancelled it")
	}
	if kt.Status != "completed" {
		d.record(soak.Record{Kind: soak.RecNote, Task: st.Task, Details: map[string]string{"step": string(st.Kind), "skipped": "status " + kt.Status}})
		return nil
	}
	// karvi has no redispatch: a person moves the task back for revision,
	// then on to in progress, which is what the intake takes again.
	d.record(soak.Record{Kind: soak.RecSendBack, Task: st.Task})
	d.watch(st.Task)
	if err := d.karvi.SetStatus(st.Task, "needs_revision", "soak: a person sent it back"); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	return d.karvi.SetStatus(st.Task, "in_progress", "soak: a person reopened it")
}

func (d *driver) restartKarvi(ctx context.Context, down time.Duration) error {
	d.record(soak.Record{Kind: soak.RecKarviRestart, Details: map[string]string{"phase": "down"}})
	if err := d.karvi.SetDown(true); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(down):
	}
	if err := d.karvi.SetDown(false); err != nil {
		return err
	}
	d.record(soak.Record{Kind: soak.RecKarviRestart, Details: map[string]string{"phase": "up"}})
	return nil
}

func (d *driver) restartServer(ctx context.Context) error {
	d.record(soak.Record{Kind: soak.RecTemporalRestart, Details: map[string]string{"phase": "down"}})
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := d.server.Restart(rctx); err != nil {
		return fmt.Errorf("restart the dev server: %w", err)
	}
	d.findServerPID()
	d.record(soak.Record{Kind: soak.RecTemporalRestart, Details: map[string]string{"phase": "up"}})
	d.logf("dev server restarted (pid %d)", d.serverPID)
	return nil
}

// retry calls f until it succeeds, fails for good, or a minute passes:
// the server may be restarting, and a loaded machine answers late. Only
// errors that say the server could not be reached are retried.
func retry(ctx context.Context, what string, f func(context.Context) error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := f(cctx)
		cancel()
		if err == nil || !isTransient(err) || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still failing after a minute: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// isTransient says whether err is the server being away or slow rather
// than an answer.
func isTransient(err error) bool {
	var (
		unavailable *serviceerror.Unavailable
		deadline    *serviceerror.DeadlineExceeded
		exhausted   *serviceerror.ResourceExhausted
		canceled    *serviceerror.Canceled
	)
	if errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &exhausted) || errors.As(err, &canceled) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "Unavailable") || strings.Contains(msg, "transport is closing")
}
