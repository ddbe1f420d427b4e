package runflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/errtext"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/flowkit"
)

// runActs is only used for its method values, like acts.
var runActs *runact.Activities

// RunWorkflow carries a run of dependent tasks to its end: it starts each
// task as a child task workflow as soon as every task it depends on is done,
// never more than the run's concurrency at once; loops a task that ends
// blocked (upgrading it to the stronger model once it stalls); blocks the
// dependents of a task that fails for good; and keeps the run's status.json
// document, written on every change and answered by the status query.
//
// Children are started with the ABANDON parent close policy: the run
// continues-as-new with tasks running, and Temporal's default policy would
// terminate them when it does.
func RunWorkflow(ctx workflow.Context, in runapi.RunInput) (runstatus.Status, error) {
	r, err := newRunFlow(ctx, in)
	if err != nil {
		return runstatus.Status{}, err
	}
	if err := r.setup(); err != nil {
		return runstatus.Status{}, err
	}
	return r.loop()
}

type runFlow struct {
	ctx workflow.Context
	log log.Logger
	in  runapi.RunInput
	run runplan.Run
	st  runState
	// inbox holds the task ends not yet applied; the goroutines that wait
	// for children fill it.
	inbox []taskEnd
	// wake is set by update handlers: the loop has something to look at.
	wake bool
	// started counts task workflows started by this run of the workflow.
	started int
	// closing holds the tasks told early as completed whose workflows
	// have not closed yet: id to attempt (early_end.go).
	closing map[string]int
	// written is st.Changes as last written to status.json; shipped what
	// was written.
	written    int
	shipped    shippedStatus
	statusFile string
	// signalsBuffered: the tasks' signals wait in their channels until
	// taken, by a listener or by the hand-over (signals.go); takers take
	// one of each kind.
	signalsBuffered bool
	takers          []func() bool
}

func newRunFlow(ctx workflow.Context, in runapi.RunInput) (*runFlow, error) {
	res, err := resumeInput(in)
	if err != nil {
		return nil, err
	}
	in, run := res.in, res.run
	r := &runFlow{ctx: ctx, log: workflow.GetLogger(ctx), in: in, written: -1, run: run}
	if len(in.Resume) > 0 {
		r.st = res.st
		r.st.ContinuedAsNew++
		if in.Reopen != nil {
			if err := r.reopen(*in.Reopen); err != nil {
				return nil, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("reopen run %s: %v", run.Slug, err), "BadReopen", err)
			}
			r.in.Reopen = nil
		}
		return r, nil
	}
	now := workflow.Now(ctx)
	r.st = runState{Doc: runstatus.New(run, now), Tasks: map[string]*runTask{}}
	for _, t := range run.Tasks {
		r.st.Tasks[t.ID] = &runTask{}
	}
	if in.Repo != "" {
		branch := in.FeatureBranch
		if branch == "" {
			branch = "feature/" + run.Slug
		}
		r.st.Repo = &runRepo{Path: in.Repo, FeatureBranch: branch}
		r.st.Doc.FeatureBranch = branch
	}
	if err := r.st.Doc.Start(now); err != nil {
		return nil, badRunState(err)
	}
	r.changed()
	return r, nil
}

// resumed is a run's input read: unpacked, its run file parsed, and the
// state it carries on from, if any, bound to it.
type resumed struct {
	in  runapi.RunInput
	run runplan.Run
	st  runState
}

func resumeInput(in runapi.RunInput) (resumed, error) {
	in, err := in.Unpack()
	if err != nil {
		return resumed{}, badRunState(err)
	}
	run, err := runplan.Parse(in.Run)
	if err != nil {
		return resumed{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("invalid run file: %v", err), activities.ErrInvalidDispatch, err)
	}
	if err := budgetError(in.Budget); err != nil {
		return resumed{}, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidDispatch, err)
	}
	res := resumed{in: in, run: run}
	if len(in.Resume) > 0 {
		if err := json.Unmarshal(in.Resume, &res.st); err != nil {
			return resumed{}, badRunState(err)
		}
		if err := res.st.Doc.Bind(run); err != nil {
			return resumed{}, badRunState(err)
		}
	}
	return res, nil
}

func badRunState(err error) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("run state handed over by continue-as-new: %v", err), "BadState", err)
}

func (r *runFlow) changed() { r.st.Changes++ }

func (r *runFlow) setup() error {
	if err := workflow.SetQueryHandlerWithOptions(r.ctx, runapi.QueryStatus, func() (runstatus.Status, error) {
		return r.st.Doc, nil
	}, workflow.QueryHandlerOptions{Description: "the run's status.json document"}); err != nil {
		return fmt.Errorf("register status query: %w", err)
	}
	if err := workflow.SetQueryHandlerWithOptions(r.ctx, runapi.QueryView, func(page runapi.ViewPage) (runapi.View, error) {
		return r.view(page), nil
	}, workflow.QueryHandlerOptions{Description: "status.json with each task's attempt, cost and last error (starter run status); " +
		`its optional argument {"from": n, "max": m} answers with m tasks from the n-th on`}); err != nil {
		return fmt.Errorf("register view query: %w", err)
	}
	if err := workflow.SetQueryHandlerWithOptions(r.ctx, runapi.QueryCost, func() (runapi.Cost, error) {
		return r.cost(), nil
	}, workflow.QueryHandlerOptions{Description: "what the tasks spent, by phase, task, model and skill, against the budget"}); err != nil {
		return fmt.Errorf("register cost query: %w", err)
	}
	if err := workflow.SetQueryHandlerWithOptions(r.ctx, runapi.QueryHandover, r.handover,
		workflow.QueryHandlerOptions{Description: "the input the run would continue from (starter reopens an ended run with it)"}); err != nil {
		return fmt.Errorf("register handover query: %w", err)
	}
	r.signalsBuffered = workflow.GetVersion(r.ctx, versionSignalsBuffered, workflow.DefaultVersion, 1) == 1
	r.listenForSpend()
	r.listenForPauses()
	r.listenForStalls()
	r.listenForEnds()
	return r.setUpdateHandlers()
}

func (r *runFlow) loop() (runstatus.Status, error) {
	r.awaitCarried()
	if err := r.prepareRepo(); err != nil {
		if !r.gitStepFailsTask() {
			return runstatus.Status{}, err
		}
		r.failReady("repository: " + errtext.Root(err))
	}
	// The document as it starts, every task queued, before any starts.
	// Runs recorded before this write existed start their tasks first.
	if workflow.GetVersion(r.ctx, versionInitialStatus, workflow.DefaultVersion, 1) == 1 {
		if err := r.writeStatus(); err != nil {
			return runstatus.Status{}, err
		}
	}
	for {
		r.applyEnds()
		r.checkBudget()
		if r.st.Aborting {
			return r.abort()
		}
		if err := r.mergeCompleted(); err != nil {
			return runstatus.Status{}, err
		}
		if err := r.startReady(); err != nil {
			return runstatus.Status{}, err
		}
		if r.finished() {
			return r.complete()
		}
		if err := r.writeStatus(); err != nil {
			return runstatus.Status{}, err
		}
		r.showDetails()
		if r.shouldContinueAsNew() {
			if r.takeSignals() {
				// Signals no listener took yet: applied, and looked at
				// by the loop (an end to apply, a budget to check, a
				// status to write) before the hand-over.
				continue
			}
			return runstatus.Status{}, r.continueAsNew()
		}
		if err := workflow.Await(r.ctx, func() bool { return len(r.inbox) > 0 || r.wake }); err != nil {
			return runstatus.Status{}, err
		}
		r.wake = false
	}
}

// running counts the tasks with a workflow out.
func (r *runFlow) running() int {
	n := 0
	for _, rt := range r.run.Tasks {
		t := r.st.Tasks[rt.ID]
		if t.Running {
			n++
		}
	}
	return n
}

// startReady starts the tasks whose dependencies are done, in run file
// order, up to the run's concurrency.
func (r *runFlow) startReady() error {
	free := r.run.Concurrency - r.running()
	for _, id := range r.st.Doc.Ready() {
		if free <= 0 || r.holdsStarts() {
			return nil
		}
		model := r.st.Doc.Tasks[id].Model
		if err := r.st.Doc.TaskStarted(id, model, workflow.Now(r.ctx)); err != nil {
			return fmt.Errorf("start task %s: %w", id, err)
		}
		r.changed()
		if err := r.prepareWorktree(id); err != nil {
			if !r.gitStepFailsTask() {
				return err
			}
			r.log.Warn("task failed: no worktree", "task", id, "error", err)
			r.st.Tasks[id].LastError = "worktree: " + errtext.Root(err)
			r.taskFailed(id, r.st.Tasks[id].LastError)
			continue
		}
		r.launch(id)
		free--
	}
	return nil
}

// launch starts the next attempt of a task as a child workflow and waits
// for it in a goroutine of its own, which reports the end to the inbox.
func (r *runFlow) launch(id string) {
	t := r.st.Tasks[id]
	t.Attempt++
	t.Running, t.RunID = true, ""
	attempt := t.Attempt
	d := r.run.Dispatch(id, r.upstream(id))
	model := r.st.Doc.Tasks[id].Model
	d.ModelHint = &model
	if t.Worktree != "" {
		d.WorkingDir = t.Worktree
	}
	in := taskapi.TaskInput{Dispatch: d, Attempt: attempt, Tuning: r.in.Tuning, ReportSpend: r.in.Budget != nil}
	if r.in.Pool != "" {
		in.Slots = &taskapi.SlotRequest{Pool: r.in.Pool, Run: r.run.Slug}
	}
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:            runapi.TaskWorkflowID(id),
		TaskQueue:             r.in.TaskQueue,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:         fmt.Sprintf("Task %s of run %s, attempt %d on %s", id, r.run.Slug, attempt, model),
		StaticDetails:         fmt.Sprintf("**%s**\n\n%s", d.TaskID, taskapi.ClipLine(d.Message, 500)),
	}
	r.started++
	r.log.Info("task started", "task", id, "attempt", attempt, "model", model)
	workflow.Go(r.ctx, func(gctx workflow.Context) {
		f := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(gctx, opts), taskapi.TaskWorkflowName, in)
		var ex workflow.Execution
		if err := f.GetChildWorkflowExecution().Get(gctx, &ex); err != nil {
			r.inbox = append(r.inbox, endOfFailure(id, attempt, "task workflow did not start: "+err.Error()))
			return
		}
		if cur := r.st.Tasks[id]; cur.Attempt == attempt {
			cur.RunID = ex.RunID
			r.wake = true // a continue-as-new may have waited for this
		}
		var res taskapi.Result
		if err := f.Get(gctx, &res); err != nil {
			r.inbox = append(r.inbox, endOfFailure(id, attempt, "task workflow ended without a result: "+errtext.Root(err)))
			return
		}
		r.inbox = append(r.inbox, endOfResult(id, attempt, res))
	})
}

// awaitCarried waits, by activity, for the task workflows an earlier run of
// this workflow started: their child futures did not survive
// continue-as-new, and the tasks go on regardless (ABANDON).
func (r *runFlow) awaitCarried() {
	for _, rt := range r.run.Tasks {
		id := rt.ID
		t := r.st.Tasks[id]
		if !t.Running {
			continue
		}
		attempt, req := t.Attempt, runact.AwaitTaskRequest{WorkflowID: runapi.TaskWorkflowID(id), RunID: t.RunID}
		workflow.Go(r.ctx, func(gctx workflow.Context) {
			var res runact.AwaitTaskResult
			err := workflow.ExecuteActivity(flowkit.AwaitOptions(gctx, "Wait for task "+id), runActs.AwaitTask, req).Get(gctx, &res)
			switch {
			case err != nil:
				r.inbox = append(r.inbox, endOfFailure(id, attempt, "waiting for the task workflow failed: "+errtext.Root(err)))
			case res.Result != nil:
				r.inbox = append(r.inbox, endOfResult(id, attempt, *res.Result))
			default:
				r.inbox = append(r.inbox, endOfFailure(id, attempt, "task workflow ended without a result: "+res.Failure))
			}
		})
	}
}

// applyEnds takes every task end in the inbox into the document.
func (r *runFlow) applyEnds() {
	for len(r.inbox) > 0 {
		e := r.inbox[0]
		r.inbox = r.inbox[1:]
		r.applyEnd(e)
	}
}

func (r *runFlow) applyEnd(e taskEnd) {
	t := r.st.Tasks[e.ID]
	if t == nil || !t.Running || t.Attempt != e.Attempt {
		r.noteClosing(e, false)
		return // an end already taken, or of an attempt given up on
	}
	r.noteClosing(e, true)
	t.Running, t.RunID, t.Spend = false, "", 0
	if e.Reached > t.Attempt && workflow.GetVersion(r.ctx, versionAttemptReached, workflow.DefaultVersion, 1) == 1 {
		// The next loop numbers on from the attempt the child reached.
		t.Attempt = e.Reached
	}
	t.CostUSD += e.CostUSD
	r.addSpend(e)
	r.changed()
	doc := &r.st.Doc
	// A task that ended while its run still saw it paused runs no more.
	_ = doc.ResumeTask(e.ID)
	if doc.Tasks[e.ID].Status != runstatus.TaskRunning {
		return
	}
	if r.st.Aborting {
		// The abort settles the tasks it stopped; one that completed before
		// the abort reached it is done (without a merge: the run is ending).
		if e.Completed && r.st.Repo == nil {
			_ = doc.Looped(e.ID)
			r.taskDone(e.ID)
		}
		return
	}
	now := workflow.Now(r.ctx)
	if err := doc.Looped(e.ID); err != nil {
		r.log.Error("loop not counted", "task", e.ID, "error", err)
	}
	if e.Completed {
		t.LastError, t.Summary = "", e.Summary
		if r.st.Repo != nil {
			t.Merge = true
			return
		}
		r.taskDone(e.ID)
		return
	}
	t.LastError = e.Error
	left, _ := doc.LoopsLeft(e.ID)
	switch {
	case e.Final:
		r.taskFailed(e.ID, e.Error)
	case left > 0:
		r.log.Info("task loops", "task", e.ID, "loops", doc.Tasks[e.ID].LoopCount, "error", e.Error)
		r.launch(e.ID)
	case doc.CanUpgrade(e.ID):
		if _, err := doc.LoopLimitReached(e.ID, 0, now); err != nil {
			r.log.Error("upgrade refused", "task", e.ID, "error", err)
			r.taskFailed(e.ID, e.Error)
			return
		}
		r.log.Info("task stalled; upgraded", "task", e.ID, "model", doc.Tasks[e.ID].Model)
	default:
		dt := doc.Tasks[e.ID]
		gaveUp := fmt.Sprintf("gave up after %d loops on %s", dt.LoopCount, dt.Model)
		if dt.ModelUpgrades > 0 {
			gaveUp = fmt.Sprintf("gave up after %d loops on %s, upgraded from %s after %d", dt.LoopCount, dt.Model, runplan.ModelSonnet, runstatus.StallLoops)
		}
		r.taskFailed(e.ID, fmt.Sprintf("%s (%s)", e.Error, gaveUp))
	}
}

func (r *runFlow) taskDone(id string) {
	if err := r.st.Doc.TaskEnded(id, runstatus.Done, 0, workflow.Now(r.ctx)); err != nil {
		r.log.Error("task end not recorded", "task", id, "error", err)
	}
	r.changed()
}

func (r *runFlow) taskFailed(id, reason string) {
	if err := r.st.Doc.TaskEnded(id, runstatus.Failed(reason), 0, workflow.Now(r.ctx)); err != nil {
		r.log.Error("task end not recorded", "task", id, "error", err)
	}
	r.changed()
}

// upstream is what a task gets to know of the tasks it depends on.
func (r *runFlow) upstream(id string) []runplan.Upstream {
	rt, _ := r.run.Task(id)
	var ups []runplan.Upstream
	for _, d := range rt.Depends {
		dt, _ := r.run.Task(d)
		ups = append(ups, runplan.Upstream{
			ID: d, Title: dt.Title, Status: string(r.st.Doc.Tasks[d].Status), Summary: r.st.Tasks[d].Summary,
		})
	}
	return ups
}

// finished: nothing runs, nothing waits to merge, nothing can start, and
// the run is not paused by a person.
func (r *runFlow) finished() bool {
	if r.running() > 0 || len(r.closing) > 0 {
		return false
	}
	for _, rt := range r.run.Tasks {
		t := r.st.Tasks[rt.ID]
		if t.Merge {
			return false
		}
	}
	// A run its budget paused ends too when nothing is left to start: a
	// person would have nothing to let go on.
	doc := &r.st.Doc
	return (doc.Status == runstatus.RunActive || doc.PausedReason == runstatus.PausedBudget) && doc.Finished()
}

func (r *runFlow) complete() (runstatus.Status, error) {
	if err := r.st.Doc.Complete(workflow.Now(r.ctx)); err != nil {
		return runstatus.Status{}, fmt.Errorf("complete run %s: %w", r.run.Slug, err)
	}
	r.changed()
	return r.close()
}

// close writes the final document and ends the workflow once no update
// handler is still running.
func (r *runFlow) close() (runstatus.Status, error) {
	if err := r.cleanUpRepo(); err != nil {
		r.log.Warn("integration worktree not removed", "error", err)
	}
	if err := r.writeStatus(); err != nil {
		return runstatus.Status{}, err
	}
	r.showDetails()
	r.notifyEnded()
	if err := workflow.Await(r.ctx, func() bool { return workflow.AllHandlersFinished(r.ctx) }); err != nil {
		return runstatus.Status{}, err
	}
	r.log.Info("run ended", "run", r.run.Slug, "status", r.st.Doc.Status)
	return r.result(), nil
}

// resultMaxBytes bounds the document a run ends with. Temporal refuses a
// result over its blob limit (2 MB by default), which the document of
// some 12,000 tasks passes, and a workflow whose completion is refused
// never ends.
const resultMaxBytes = 3 << 19 // 1.5 MB

// result is the document the run ends with: the whole of it, or, past
// resultMaxBytes, all of it but its task entries (its summary counts
// them), which status.json, the status query and the view hold.
func (r *runFlow) result() runstatus.Status {
	doc := r.st.Doc
	if data, err := json.Marshal(doc); err == nil && len(data) <= resultMaxBytes {
		return doc
	}
	doc.Tasks = nil
	return doc
}

// abortWait bounds how long an aborted run waits for its tasks to end.
const abortWait = 2 * time.Minute

// abort stops every running task (each is told to abort, and stops its own
// conductor) and ends the run.
func (r *runFlow) abort() (runstatus.Status, error) {
	reason := flowkit.FirstNonBlank(r.st.AbortReason, "run aborted")
	var sent []workflow.Future
	for _, rt := range r.run.Tasks {
		t := r.st.Tasks[rt.ID]
		if !t.Running {
			continue
		}
		sent = append(sent, workflow.SignalExternalWorkflow(r.ctx, runapi.TaskWorkflowID(rt.ID), "",
			taskapi.SignalAbort, taskapi.AbortSignal{Reason: reason}))
	}
	for _, f := range sent {
		if err := f.Get(r.ctx, nil); err != nil {
			r.log.Warn("abort not delivered to a task", "error", err)
		}
	}
	// The aborted tasks stop their conductors and end within moments: wait
	// for them (a while at most), so their spending counts and nothing the
	// run started still runs when it reports its end.
	deadline := workflow.Now(r.ctx).Add(abortWait)
	for r.applyEnds(); r.running() > 0; r.applyEnds() {
		left := deadline.Sub(workflow.Now(r.ctx))
		if left <= 0 {
			r.log.Warn("aborted tasks still running; the run ends without them", "running", r.running())
			break
		}
		if _, err := workflow.AwaitWithTimeout(r.ctx, left, func() bool { return len(r.inbox) > 0 }); err != nil {
			return runstatus.Status{}, err
		}
	}
	if err := r.abortDocument(); err != nil {
		return runstatus.Status{}, fmt.Errorf("abort run %s: %w", r.run.Slug, err)
	}
	r.changed()
	return r.close()
}

// writeStatus writes status.json when the document changed since it was
// last written. A local activity: one marker in history per write.
//
// The first write of each run of the workflow ships the whole document;
// the next ones only the task entries that changed (and the few fields
// outside the tasks), which the worker applies to the document it wrote
// last. A worker that does not hold it answers NeedBase, and the whole
// document follows in a second write. So a change costs what it changed,
// not the size of the run.
func (r *runFlow) writeStatus() error {
	if r.written == r.st.Changes {
		return nil
	}
	// The signal listeners run while the write is out: what they change
	// meanwhile is not in it, so neither the count nor the entries taken
	// as written may be read after it (signals.go).
	changes := r.st.Changes
	req := runact.RunStatusRequest{Slug: r.run.Slug, Steps: r.runSteps(),
		Writer: workflow.GetInfo(r.ctx).WorkflowExecution.RunID, Seq: r.shipped.seq + 1, Final: r.st.Doc.Finished() && r.ended()}
	if r.st.Repo != nil {
		req.Repo = r.st.Repo.Path
	}
	var res runact.RunStatusResult
	var sent map[string]runstatus.Task
	var sentIDs []string // sent's keys in run file order, when a patch
	if r.shipped.tasks != nil {
		top, changed, ids, err := r.statusPatch()
		if err != nil {
			return err
		}
		// Only what changed is copied: a run of 10,000 tasks would copy
		// every entry at every write.
		sent, sentIDs = make(map[string]runstatus.Task, len(ids)), ids
		for _, id := range ids {
			sent[id] = copyTask(r.st.Doc.Tasks[id])
		}
		req.Patch, req.Top, req.Tasks = true, top, changed
		if err := workflow.ExecuteLocalActivity(runStatusOptions(r.ctx, r.st.Doc), runActs.WriteRunStatus, req).Get(r.ctx, &res); err != nil {
			return fmt.Errorf("write status.json of run %s: %w", r.run.Slug, err)
		}
		req.Patch, req.Top, req.Tasks = false, nil, nil
	}
	sentWhole := r.shipped.tasks == nil || res.NeedBase
	if sentWhole {
		doc, err := json.Marshal(r.st.Doc)
		if err != nil {
			return fmt.Errorf("encode run status: %w", err)
		}
		sent = make(map[string]runstatus.Task, len(r.st.Doc.Tasks))
		for _, rt := range r.run.Tasks {
			sent[rt.ID] = copyTask(r.st.Doc.Tasks[rt.ID])
		}
		req.Document = doc
		if err := workflow.ExecuteLocalActivity(runStatusOptions(r.ctx, r.st.Doc), runActs.WriteRunStatus, req).Get(r.ctx, &res); err != nil {
			return fmt.Errorf("write status.json of run %s: %w", r.run.Slug, err)
		}
	}
	r.shipped.seq = req.Seq
	if sentWhole {
		r.shipped.tasks = sent
	} else {
		// In run file order, never by ranging over a map, as everything
		// a workflow does.
		for _, id := range sentIDs {
			r.shipped.tasks[id] = sent[id]
		}
	}
	if len(res.Paths) > 0 {
		r.statusFile = res.Paths[0]
	}
	r.written = r.st.Changes
	if r.signalsBuffered {
		r.written = changes
	}
	return nil
}

// ended: the run is complete or partial.
func (r *runFlow) ended() bool {
	return r.st.Doc.Status == runstatus.RunComplete || r.st.Doc.Status == runstatus.RunPartial
}

// shippedStatus is what this run of the workflow last wrote to
// status.json: the write's number and each task's entry as it was. It is
// not handed over: the next run writes the whole document first.
type shippedStatus struct {
	seq   int
	tasks map[string]runstatus.Task
}

// statusPatch is the document without its tasks, and the task entries
// that changed since the last write, encoded, with their ids in run file
// order.
func (r *runFlow) statusPatch() (json.RawMessage, map[string]json.RawMessage, []string, error) {
	head := r.st.Doc
	head.Tasks = nil
	top, err := json.Marshal(head)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode run status: %w", err)
	}
	changed := map[string]json.RawMessage{}
	var ids []string
	for _, rt := range r.run.Tasks {
		t := r.st.Doc.Tasks[rt.ID]
		if old, ok := r.shipped.tasks[rt.ID]; ok && t != nil && sameTask(old, *t) {
			continue
		}
		data, err := json.Marshal(t)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("encode run status of task %s: %w", rt.ID, err)
		}
		changed[rt.ID] = data
		ids = append(ids, rt.ID)
	}
	return top, changed, ids, nil
}

// copyTask is a copy of a task's entry that shares nothing with it.
func copyTask(t *runstatus.Task) runstatus.Task {
	if t == nil {
		return runstatus.Task{}
	}
	c := *t
	c.BlockedBy = slices.Clone(t.BlockedBy)
	c.ConflictFiles = slices.Clone(t.ConflictFiles)
	return c
}

// sameTask: the two entries would be written alike.
// (an entry found different that is not only costs a line in the patch;
// TestSameTaskSeesEveryField keeps it in step with the fields).
func sameTask(a, b runstatus.Task) bool {
	return a.Status == b.Status && a.IssueNumber == b.IssueNumber && a.PRNumber == b.PRNumber &&
		slices.Equal(a.BlockedBy, b.BlockedBy) && a.Branch == b.Branch && a.Worktree == b.Worktree &&
		a.WorktreeStatus == b.WorktreeStatus && a.WorktreeCreatedAt.Equal(b.WorktreeCreatedAt) &&
		a.StartedAt.Equal(b.StartedAt) && a.CompletedAt.Equal(b.CompletedAt) && a.FailedAt.Equal(b.FailedAt) &&
		a.ConflictAt.Equal(b.ConflictAt) && a.Error == b.Error && slices.Equal(a.ConflictFiles, b.ConflictFiles) &&
		a.MergedAt.Equal(b.MergedAt) && a.Model == b.Model && a.LoopCount == b.LoopCount &&
		a.ModelUpgrades == b.ModelUpgrades && a.RevisionCount == b.RevisionCount &&
		a.PausedAt.Equal(b.PausedAt) && a.PausedReason == b.PausedReason &&
		a.StalledAt.Equal(b.StalledAt) && a.StalledPhase == b.StalledPhase
}

// shouldContinueAsNew: when Temporal suggests it, or after the configured
// number of task starts, and only at a point where nothing is half done: no
// child between start and started (its run id is what the next run waits
// on), no merge pending, no update in flight, no end unapplied.
func (r *runFlow) shouldContinueAsNew() bool {
	if !r.dueToHandOver() {
		return false
	}
	for _, rt := range r.run.Tasks {
		t := r.st.Tasks[rt.ID]
		if (t.Running && t.RunID == "") || t.Merge {
			return false
		}
	}
	// Tasks told early and still closing do not hold the hand-over back
	// (with many tasks some always are): they are done in the document,
	// and the next run does not wait for their close.
	return len(r.inbox) == 0 && workflow.AllHandlersFinished(r.ctx)
}

// dueToHandOver: Temporal suggests continue-as-new, or this run of the
// workflow started the tasks it was told to hand over after.
func (r *runFlow) dueToHandOver() bool {
	limit := r.in.ContinueAsNewAfter
	return workflow.GetInfo(r.ctx).GetContinueAsNewSuggested() || (limit > 0 && r.started >= limit)
}

// holdsStarts: a run due to continue-as-new starts no more tasks until it
// has. A start holds the hand-over back until the server answers it, and
// a large run starts tasks all the time: without the hold the moment never
// came, and a 10,000-task run's history grew past 40 MB, toward the 50 MB
// at which the server terminates a workflow.
func (r *runFlow) holdsStarts() bool {
	return r.dueToHandOver() &&
		workflow.GetVersion(r.ctx, versionHoldStartsForHandover, workflow.DefaultVersion, 1) == 1
}

func (r *runFlow) continueAsNew() error {
	next, err := r.handover()
	if err != nil {
		return err
	}
	r.log.Info("continuing as new", "run", r.run.Slug, "running", r.running())
	return workflow.NewContinueAsNewError(r.ctx, runapi.RunWorkflowName, next)
}

// handover is the input the next run of the workflow starts from.
func (r *runFlow) handover() (runapi.RunInput, error) {
	data, err := json.Marshal(r.st)
	if err != nil {
		return runapi.RunInput{}, fmt.Errorf("hand over the run state: %w", err)
	}
	next := r.in
	next.Resume = data
	next.Reopen = nil
	// Packed: the run file and the state of a run of thousands of tasks
	// are megabytes of JSON, over Temporal's 2 MB payload limit, and
	// compress many times over. A history recorded before handed them
	// over plain; Unpack reads either.
	return next.Pack()
}

// reopen takes an ended run back to active and applies the request it was
// reopened for; a request that does not apply leaves it ended.
func (r *runFlow) reopen(req runapi.Reopen) error {
	doc := &r.st.Doc
	if err := doc.Reopen(); err != nil {
		return err
	}
	var err error
	switch req.Update {
	case runapi.UpdateRetry:
		if t := doc.Tasks[req.Task.Task]; t != nil && t.Status == runstatus.TaskNeedsHumanRebase {
			if err = doc.RetryMerge(req.Task.Task); err == nil {
				r.st.Tasks[req.Task.Task].Merge = true
			}
		} else {
			err = doc.Retry(req.Task.Task)
		}
	case runapi.UpdateSkip:
		err = doc.Skip(req.Task.Task)
	default:
		err = fmt.Errorf("a run is reopened to retry or skip a task, not to %q", req.Update)
	}
	if err != nil {
		return err
	}
	r.st.Aborting, r.st.AbortReason = false, ""
	r.changed()
	return nil
}

func (r *runFlow) view(page runapi.ViewPage) runapi.View {
	tasks := r.run.Tasks
	from := min(max(page.From, 0), len(tasks))
	if page.Max > 0 {
		tasks = tasks[from:min(from+page.Max, len(tasks))]
	} else {
		from = 0
	}
	doc := r.st.Doc
	if len(tasks) < len(r.run.Tasks) {
		doc.Tasks = make(map[string]*runstatus.Task, len(tasks))
		for _, rt := range tasks {
			doc.Tasks[rt.ID] = r.st.Doc.Tasks[rt.ID]
		}
	}
	v := runapi.View{
		TaskCount:      len(r.run.Tasks),
		From:           from,
		Slug:           r.run.Slug,
		Title:          r.run.Title,
		Concurrency:    r.run.Concurrency,
		Running:        r.running(),
		Status:         doc,
		StatusFile:     r.statusFile,
		AbortReason:    r.st.AbortReason,
		Budget:         r.in.Budget,
		BudgetNote:     r.st.BudgetNote,
		ContinuedAsNew: r.st.ContinuedAsNew,
		UpdatedAt:      workflow.Now(r.ctx),
	}
	if r.st.Repo != nil {
		v.Repo = r.st.Repo.Path
	}
	ended, running := r.spent()
	v.SpentUSD = ended + running
	for _, rt := range tasks {
		t := r.st.Tasks[rt.ID]
		v.Tasks = append(v.Tasks, runapi.TaskView{
			ID: rt.ID, Title: rt.Title, Depends: rt.Depends,
			WorkflowID: runapi.TaskWorkflowID(rt.ID), Attempt: t.Attempt,
			CostUSD: t.CostUSD, LastError: t.LastError,
		})
	}
	if from == 0 {
		v.Overlaps = overlapsView(r.st.Touched)
	}
	return v
}
