package taskact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/jobview"
	"karvi-edda-temporal/mapping"
)

// DeliverRequest asks the tail to carry an attempt's events to the sink
// from Cursor on: read each line as the file grows, reduce it into Brief,
// and PATCH the sink at once, in order.
type DeliverRequest struct {
	TaskID string          `json:"taskId"`
	Plan   PlanInfo        `json:"plan"`
	Handle ConductorHandle `json:"handle"`
	// Cursor and Brief are the workflow's last checkpoint: the brief as the
	// events before Cursor made it.
	Cursor TailCursor         `json:"cursor"`
	Brief  mapping.BriefState `json:"brief"`
	// Unconfirmed says an earlier delivery from this checkpoint may have
	// sent patches the workflow never heard of (it was cancelled, or its
	// worker died). They are looked up in the sink before anything is sent.
	Unconfirmed bool `json:"unconfirmed,omitempty"`
	// TaskStatus is the task's status as the workflow last wrote it; Base
	// carries the dispatch's plan id and name for status writes.
	TaskStatus mapping.TaskStatus `json:"taskStatus,omitempty"`
	Base       TaskStatusUpdate   `json:"base"`
	// MaxWait bounds a call that sees no event, so the workflow can check
	// for a silent conductor; zero reads what is there and returns (the
	// conductor was stopped). CheckpointEvery bounds a call that delivered
	// something, so the workflow's copy of the brief, its queries and search
	// attributes stay at most that far behind the sink.
	MaxWait         time.Duration `json:"maxWait"`
	CheckpointEvery time.Duration `json:"checkpointEvery,omitempty"`
	// SpendEachPhase: the workflow checks a budget (the task's, or its
	// run's), so a checkpoint at a phase boundary also reads what the
	// conductor spent. Otherwise only a checkpoint that ends the attempt or
	// meets no boundary does, and the brief's phase costs come from the
	// events: a short plan's brief is then one patch per event.
	SpendEachPhase bool `json:"spendEachPhase,omitempty"`
	// Job is the attempt's job-view tally as of the checkpoint; nil starts
	// a new one.
	Job *jobview.Tally `json:"job,omitempty"`
	// Stream is the task's canonical event stream: the workflow's steps
	// are stored first, then every event as it is read (events.go). Nil
	// stores nothing (workflows started before the stream existed).
	Stream *StreamInfo `json:"stream,omitempty"`
	// LimitWatch follows the agents' transcripts for a usage limit (limits.go).
	LimitWatch
	// StallWatch reports a phase that shows no progress (stall.go).
	StallWatch
}

// DeliverResult is a checkpoint: how far delivery got and what the
// workflow needs to know about it.
type DeliverResult struct {
	Next  TailCursor         `json:"next"`
	Brief mapping.BriefState `json:"brief"`
	// Events were reduced, Patches acknowledged by the sink, Resumed found
	// already in the sink (sent by an earlier delivery) and not sent again.
	Events  int `json:"events,omitempty"`
	Patches int `json:"patches,omitempty"`
	Resumed int `json:"resumed,omitempty"`
	// Malformed lines were counted and skipped; the last one, redacted, is
	// MalformedSample.
	Malformed       int    `json:"malformed,omitempty"`
	MalformedSample string `json:"malformedSample,omitempty"`
	// TaskStatus is the status this call wrote (in_progress at the first
	// phase start), "" for none.
	TaskStatus mapping.TaskStatus `json:"taskStatus,omitempty"`
	// Outcome is a terminal event's outcome; delivery stops after it.
	Outcome *mapping.Outcome `json:"outcome,omitempty"`
	// SinkProblem is a refusal no retry can fix (karvi has no brief for
	// the task): the events were reduced but not delivered.
	SinkProblem string `json:"sinkProblem,omitempty"`
	// ConductorEnd is set once the conductor is gone and its log was
	// delivered to the end.
	ConductorEnd
	// Job is the attempt's job-view tally as of this checkpoint (nil from
	// a worker without the job view).
	Job *jobview.Tally `json:"job,omitempty"`
	// Stream is what this call stored in the task's event stream.
	Stream activities.StreamCounts `json:"stream,omitzero"`
	// LimitWatch is the transcripts' cursor and a usage limit they showed.
	LimitWatch
	// StallWatch is the last sign of progress and a stall that began.
	StallWatch
	// TailHeartbeat is the worker's heartbeat timeout for a delivering
	// tail (Config.TailHeartbeat), for the workflow to schedule the next
	// delivery with.
	TailHeartbeat time.Duration `json:"tailHeartbeat,omitempty"`
}

const (
	// defaultCheckpointEvery is the backstop of a delivery that meets no
	// phase boundary: a checkpoint is a few state transitions on the
	// server (the activity's completion, a workflow task, the next
	// delivery), and a running task must cost it almost nothing between
	// the boundaries where the workflow has something to learn.
	defaultCheckpointEvery = 10 * time.Minute
	// boundaryHard bounds how long a checkpoint due at a phase boundary
	// waits for the log to go quiet.
	boundaryHard = time.Second
	// checkpointQuiet is how long the log must stay quiet after a line for
	// a due checkpoint to be taken: a burst (phase_passed and the next
	// phase_start come within a few ms) is delivered whole first, and the
	// gap that follows (a workflow task and an activity dispatch, 10-40 ms
	// on a quiet server) ends before the next line of an agent that writes
	// even every 100 ms.
	checkpointQuiet = 20 * time.Millisecond
	// heldRecheck is how often a delivery that holds patches back (the
	// sink is congested) looks whether it can send them, while no event
	// comes: about one refill of karvi's default rate limit.
	heldRecheck = 500 * time.Millisecond
	// heldFirstCheckpoint is the least interval of an attempt's first
	// checkpoint while its skeleton is held (StartAttempt).
	heldFirstCheckpoint = 2500 * time.Millisecond
	// maxResumeBytes bounds how much of the log a resumed delivery reads
	// ahead to find what the sink already has.
	maxResumeBytes = 16 << 20
)

// DeliverEvents is the tail of an attempt's event log and the brief's
// delivery in one: an event's PATCH leaves as soon as inotify reports its
// line, without a round trip through the workflow, and the first phase
// start sets the task in_progress. It returns at a
// checkpoint: a terminal event, the conductor's exit, CheckpointEvery after
// it delivered something, or MaxWait without news.
//
// Delivery is exactly-once in effect. The workflow records each checkpoint;
// a call that starts where an earlier one may have gone further (a retry
// after a worker crash, or the next call after a cancelled one) first asks
// the sink for its brief and skips the patches that brief shows it already
// received, so the sink's brief never moves backwards and its log never
// shows an entry twice.
func (a *Activities) DeliverEvents(ctx context.Context, req DeliverRequest) (DeliverResult, error) {
	stopBeat := activities.Heartbeat(ctx, activities.HeartbeatEvery)
	defer stopBeat()
	defer sink.Attend(a.Sink)()
	d := &delivery{
		a: a, req: req, explain: a.explainer(req.Plan.PlanPath),
		brief: req.Brief.Clone(),
		res:   DeliverResult{Next: req.Cursor},
	}
	if err := d.appendSteps(ctx); err != nil {
		return DeliverResult{}, err
	}
	a.traceSteps(ctx, req.Stream, req.TaskID, req.Base.PlanID)
	if req.Unconfirmed || (activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt > 1) {
		if err := d.skipDelivered(ctx); err != nil {
			return DeliverResult{}, err
		}
	}
	if err := d.run(ctx); err != nil {
		return DeliverResult{}, err
	}
	if err := d.finish(ctx); err != nil {
		return DeliverResult{}, err
	}
	d.res.Brief = d.brief
	d.res.Job = d.checkpointTally(ctx)
	return d.res, nil
}

type delivery struct {
	a       *Activities
	req     DeliverRequest
	explain explainFunc
	enc     mapping.BriefEncoder
	brief   mapping.BriefState
	res     DeliverResult
	// skip is how many of the next patches the sink already holds;
	// heldSpend the costs that brief shows, taken on once they are skipped.
	skip      int
	heldSpend mapping.Spend
	// sinkDown: the sink refused for good; reduce, do not send.
	sinkDown bool
	// job is the attempt's job-view tally (jobview.go).
	job *jobview.Tally
	// hold merges the patches that would wait for their turn at the sink
	// (karvi's rate limit) into one, across batches: they leave once the
	// sink is no longer congested, and always before a checkpoint (finish).
	hold sink.Coalescer
	// limits follows the transcripts for a usage limit (limits.go).
	limits *limitWatcher
	// atBoundary: the batch being taken holds a phase boundary; metBoundary:
	// a boundary made this call's checkpoint due.
	// heldStart: the attempt's skeleton waits its turn at the sink, and the
	// first checkpoint waits for heldFirstCheckpoint, boundary or not.
	atBoundary, metBoundary, heldStart bool
	// phaseEnds are the phase ends read, whose spans leave at the
	// checkpoint (traces.go).
	phaseEnds []phaseEnd
}

func (d *delivery) run(ctx context.Context) error {
	var stall *stallWatch
	defer func() { d.endStallWatch(stall) }()
	defer d.watchLimits(ctx)()
	stall = d.newStallWatch(time.Now())
	path := d.req.Plan.EventsPath
	exited := func() bool {
		st, err := proc.Inspect(d.req.Handle.proc())
		return err == nil && !st.Alive
	}
	var w *tailer.Waiter
	if d.req.MaxWait > 0 {
		var err error
		if w, err = tailer.NewWaiter(path); err != nil {
			return fmt.Errorf("watch %s: %w", path, err)
		}
		defer w.Close()
		defer d.a.Metrics.WatchConductor()()
	}
	cp := newCheckpointClock(time.Now(), d.checkpointEvery(), d.req.MaxWait)
	// A worker asked to stop (a drain, an upgrade) takes a checkpoint at
	// once: the workflow schedules the next delivery on the same host's
	// queue, where the worker that replaces this one picks it up.
	waitCtx, stopping, cancel := untilWorkerStops(ctx)
	defer cancel()
	for {
		var batch tailer.Batch
		var err error
		if w != nil {
			wait := cp.wait(time.Now(), d.res.Events > 0)
			if wait <= 0 || stopping() {
				return nil // checkpoint
			}
			if d.hold.Held() > 0 {
				// Look again soon whether the sink can take what is held.
				wait = min(wait, heldRecheck)
			}
			var goOn bool
			if wait, goOn = d.stallWait(ctx, stall, time.Now(), wait); !goOn {
				return nil // checkpoint: a stall began or ended
			}
			batch, err = w.Wait(waitCtx, d.res.Next.tailer(), tailer.WaitOptions{
				MaxWait: wait, Poll: d.a.Config.TailPoll, MaxBytes: maxBatchBytes, Stop: exited,
			})
			if len(batch.Lines) > 0 {
				cp.line(time.Now())
				stall.line(time.Now())
			}
		} else {
			batch, err = tailer.ReadFrom(path, d.res.Next.tailer(), maxBatchBytes)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !stopping() {
				return fmt.Errorf("read %s: %w", path, err)
			}
			// The wait was cut short by the stop: what it read is whole.
		}
		if err := d.take(ctx, batch); err != nil {
			return err
		}
		if d.res.Outcome != nil || stopping() {
			return nil
		}
		if d.atBoundary && !d.heldStart {
			cp.boundary()
			d.metBoundary = true
		}
		d.atBoundary = false
		if len(batch.Lines) > 0 {
			continue
		}
		// Nothing new: the conductor is gone, or the wait ran out.
		st, err := proc.Inspect(d.req.Handle.proc())
		if err != nil {
			return fmt.Errorf("inspect conductor pid %d: %w", d.req.Handle.PID, err)
		}
		if st.Alive {
			if w == nil {
				return nil // a drain returns what is there
			}
			continue
		}
		return d.drain(ctx, st.ExitCode)
	}
}

// checkpointClock decides when a delivery reports back: at a phase
// boundary (a phase starts or ends: the workflow's brief, queries, search
// attributes and the spend it checks budgets against then move on), and
// otherwise only every interval, which is long by default. Between two
// deliveries no activity reads the log, so an event written in that gap
// waits for the workflow to schedule the next one (tens to hundreds of ms
// under load). Agents write in bursts with seconds between them, so a due
// checkpoint waits for the next burst, delivers it, and is taken once the
// log has been quiet for checkpointQuiet: the gap then falls where no
// event is likely. A conductor that stays silent, or never pauses, still
// reports after twice the interval.
type checkpointClock struct {
	began, due, hard time.Time
	maxWait          time.Duration
	lastLine         time.Time
}

func newCheckpointClock(now time.Time, every, maxWait time.Duration) *checkpointClock {
	return &checkpointClock{began: now, due: now.Add(every), hard: now.Add(2 * every), maxWait: maxWait}
}

// line notes that lines were delivered at now.
func (c *checkpointClock) line(now time.Time) { c.lastLine = now }

// boundary makes a checkpoint due for a phase boundary in the lines read
// last: it is taken once the burst around it ends (a phase's end and the
// next one's start come together), and within boundaryHard at the latest.
func (c *checkpointClock) boundary() {
	at := c.lastLine
	if at.Before(c.due) {
		c.due = at
	}
	if h := at.Add(boundaryHard); h.Before(c.hard) {
		c.hard = h
	}
}

// wait is how long to wait for more lines before the checkpoint; zero or
// less means take it now. Without progress to report, only MaxWait (the
// workflow's silence check) bounds the call.
func (c *checkpointClock) wait(now time.Time, progress bool) time.Duration {
	if !progress {
		return c.began.Add(c.maxWait).Sub(now)
	}
	until := c.hard
	switch {
	case now.Before(c.due):
		until = c.due
	case !c.lastLine.Before(c.due):
		until = c.lastLine.Add(checkpointQuiet) // a burst after due: when it ends
	}
	if until.After(c.hard) {
		until = c.hard
	}
	return until.Sub(now)
}

// drain reads a gone conductor's log to its end (only complete lines can
// be left, perhaps a torn last one), then its final state.
func (d *delivery) drain(ctx context.Context, exitCode int) error {
	path := d.req.Plan.EventsPath
	for read := 0; read < maxDrainBytes; {
		more, err := tailer.ReadFrom(path, d.res.Next.tailer(), maxBatchBytes)
		if err != nil {
			return fmt.Errorf("drain %s: %w", path, err)
		}
		if len(more.Lines) == 0 {
			break
		}
		for _, l := range more.Lines {
			read += len(l.Data) + 1
		}
		if err := d.take(ctx, more); err != nil {
			return err
		}
		if d.res.Outcome != nil {
			return nil
		}
		if read >= maxDrainBytes {
			// More is waiting: a checkpoint now, and the next call drains on.
			return nil
		}
	}
	if swept := d.a.sweepLeftovers(ctx, d.req.Plan, d.req.Handle); swept != "" {
		if err := d.note(ctx, "sweep", swept); err != nil {
			return err
		}
	}
	end := endOf(d.req.Plan, d.req.Handle, exitCode, d.explain)
	if end.Stopped != nil {
		detail := end.Stopped.Describe("of " + d.req.Plan.Summary.Name)
		activities.Logger(ctx).Warn("the conductor was stopped by the runtime", "plan", d.req.Plan.Summary.Name, "stop", detail)
		if err := d.note(ctx, "fence", detail); err != nil {
			return err
		}
	}
	d.res.ConductorEnd = end
	return nil
}

// take reduces and delivers a batch, in order.
func (d *delivery) take(ctx context.Context, batch tailer.Batch) error {
	evs, malformed, sample := parseLines(batch.Lines, d.explain)
	d.a.Metrics.Read(evs, malformed)
	d.res.Malformed += malformed
	if sample != "" {
		d.res.MalformedSample = sample
	}
	d.tallyBatch(evs)
	for _, ev := range evs {
		if err := d.step(ctx, ev); err != nil {
			return err
		}
	}
	// What is held stays held while the sink is congested, merging with
	// the patches of the batches that follow; once it is not, it leaves.
	if !sink.Congested(d.a.Sink) {
		if err := d.flush(ctx); err != nil {
			return err
		}
	}
	if err := d.appendConductor(ctx, evs); err != nil {
		return err
	}
	// The cursor moves only once the batch is delivered (or held, to be
	// sent before the checkpoint that reports the cursor: finish) and
	// stored: a call that fails midway is retried from the checkpoint,
	// never past an undelivered line.
	d.res.Next = cursorOf(batch.Next)
	return nil
}

// checkpointEvery is the backstop of the delivery's checkpoints: the
// workflow's, else the default at the worker's time scale.
func (d *delivery) checkpointEvery() time.Duration {
	if d.req.CheckpointEvery > 0 {
		return d.req.CheckpointEvery
	}
	return d.a.Config.Scale.Of(defaultCheckpointEvery)
}

// finish ends a call's delivery before its checkpoint: the spend the
// conductor reported, then everything held is sent, so the checkpoint
// claims only what the sink acknowledged.
func (d *delivery) finish(ctx context.Context) error {
	d.res.TailHeartbeat = d.a.Config.TailHeartbeatOrDefault()
	if d.res.Outcome != nil && !d.res.Exited {
		if err := d.awaitExit(ctx); err != nil {
			return err
		}
	}
	ends := d.res.Outcome != nil || d.res.Exited
	if ends || d.req.SpendEachPhase || !d.metBoundary {
		if err := d.applySpend(ctx); err != nil {
			return err
		}
	}
	if err := d.flush(ctx); err != nil {
		return err
	}
	d.emitPhases(ctx)
	return nil
}

func (d *delivery) step(ctx context.Context, ev mapping.Event) error {
	d.res.Events++
	if isPhaseBoundary(ev.Type) {
		d.atBoundary = true
	}
	d.judgeEvent(ctx, ev)
	d.notePhaseEnd(ev)
	if c, ok := d.brief.Reduce(ev); ok {
		if d.skip > 0 {
			d.skip--
			d.res.Resumed++
			if d.skip == 0 {
				d.brief.ApplySpend(d.heldSpend)
			}
		} else if err := d.patch(ctx, d.enc.Patch(&d.brief, c)); err != nil {
			return err
		}
	}
	if ev.Type == mapping.EventPhaseStart && d.res.Outcome == nil && d.status() != mapping.TaskInProgress {
		// Patches held back (karvi is congested) stay held: the status
		// write goes ahead of brief writes at the rate limit anyway, and
		// flushing here would cost a request more. Nothing is held when
		// karvi is not congested.
		d.setStatus(ctx, mapping.TaskInProgress, mapping.PlanRunning)
	}
	// The final status is the workflow's to write: a redispatch that came
	// before the plan completed wins over the completion, so the task never
	// shows completed for an attempt that was redispatched.
	if ev.IsTerminal() && d.res.Outcome == nil {
		if o, ok := mapping.OutcomeFromEvent(ev, d.brief); ok {
			d.res.Outcome = &o
		}
	}
	return nil
}

// isPhaseBoundary says whether an event is a phase boundary, where a
// checkpoint is due: a phase starts. The end of the phase
// before came a moment earlier (a phase_passed, phase_failed or
// phase_skipped is followed at once by the next phase_start, a terminal
// event, or the conductor's exit, which end a delivery anyway), and its
// agent now works before it writes again: the checkpoint's gap, while no
// delivery reads the log, falls where no event comes. A checkpoint at a
// phase's end could instead hold back the next phase_start behind it
// whenever the conductor is a little slow to write it.
func isPhaseBoundary(typ string) bool { return typ == mapping.EventPhaseStart }

// status is the task's status as far as this call knows.
func (d *delivery) status() mapping.TaskStatus {
	if d.res.TaskStatus != "" {
		return d.res.TaskStatus
	}
	return d.req.TaskStatus
}

// patch sends one body, retrying what a retry can fix for as long as the
// activity lives (a karvi outage holds delivery back, in order, and loses
// nothing). A refusal for good is recorded, and the rest of the call only
// reduces.
func (d *delivery) patch(ctx context.Context, p mapping.Patch) error {
	if d.sinkDown {
		return nil
	}
	if held, err := d.hold.Hold(d.a.Sink, p.Body); err != nil || held {
		return err
	}
	return d.send(ctx, p.Body, 1)
}

// flush sends what hold merged, as one write standing for n patches: a
// PATCH, or a replacement of the whole brief when what is held began with
// the attempt's skeleton (Coalescer.HoldWhole, in StartAttempt).
func (d *delivery) flush(ctx context.Context) error {
	body, n, whole, err := d.hold.Take()
	if err != nil || n == 0 || d.sinkDown {
		return err
	}
	if whole {
		return d.write(ctx, n, func() error { return sink.ReplaceBrief(ctx, d.a.Sink, d.req.TaskID, body) })
	}
	return d.send(ctx, body, n)
}

func (d *delivery) send(ctx context.Context, body json.RawMessage, n int) error {
	return d.write(ctx, n, func() error { return d.a.Sink.PatchBrief(ctx, d.req.TaskID, body) })
}

// write makes one brief write standing for n patches, as patch says.
func (d *delivery) write(ctx context.Context, n int, do func() error) error {
	err := d.retry(ctx, do)
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		d.res.Patches += n
	case errors.As(err, &appErr) && appErr.NonRetryable():
		d.sinkDown = true
		d.res.SinkProblem = err.Error()
		if !errors.Is(err, sink.ErrAlreadyReported) {
			activity.GetLogger(ctx).Warn("brief patch not delivered", "task", d.req.TaskID, "error", err)
		}
	default:
		return err
	}
	return nil
}

// setStatus writes a status the events decided. A refusal for good is
// recorded as a sink problem; the run goes on.
func (d *delivery) setStatus(ctx context.Context, s mapping.TaskStatus, ps mapping.PlanStatus) {
	u := d.req.Base
	u.Status, u.DispatchState = s, mapping.DispatchStateFor(ps)
	err := d.retry(ctx, func() error { return d.a.Sink.SetStatus(ctx, d.req.TaskID, u.sink()) })
	if err != nil {
		d.res.SinkProblem = err.Error()
		return
	}
	d.res.TaskStatus = s
}

// retry runs a sink write until it succeeds, fails for good, or the
// activity ends. Errors come back as the sink activities' errors
// (sinkError), so refusals are non-retryable application errors.
func (d *delivery) retry(ctx context.Context, write func() error) error {
	backoff := 100 * time.Millisecond
	for {
		err := write()
		if err == nil {
			return nil
		}
		err = sinkError("deliver to task "+d.req.TaskID, err)
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.NonRetryable() {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// skipDelivered finds how many patches past the checkpoint the sink already
// holds (see delivered) and skips them. When nothing matches, the sink
// holds something else (another writer, or a lost skeleton) and delivery
// sends again from the checkpoint, which converges to the same brief.
func (d *delivery) skipDelivered(ctx context.Context) error {
	n, matched, err := d.delivered(ctx)
	if err != nil {
		return err
	}
	if !matched {
		activity.GetLogger(ctx).Warn("the sink's brief matches no state since the checkpoint; delivering again from it",
			"task", d.req.TaskID)
		return nil
	}
	d.skip = n
	return nil
}

// delivered reads the sink's brief and finds which state it shows: the
// checkpoint's own (0), or the one after the nth patch past it, reducing
// the log ahead on a copy of the brief. Every patch carries the whole log,
// so at most one state matches. matched is false when the sink has no
// brief or one that matches none of them.
func (d *delivery) delivered(ctx context.Context) (n int, matched bool, err error) {
	held, err := d.held(ctx)
	if err != nil {
		return 0, false, err
	}
	return d.deliveredIn(held)
}

// held is the sink's brief, nil when it has none or refused to show it
// (the refusal is recorded as a sink problem).
func (d *delivery) held(ctx context.Context) (map[string]any, error) {
	held, err := d.a.Sink.CurrentBrief(ctx, d.req.TaskID)
	if err != nil {
		err = sinkError("read the brief of task "+d.req.TaskID, err)
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || !appErr.NonRetryable() {
			return nil, err
		}
		// A refusal for good (a rotated token, a task gone from the board)
		// is what an ordinary delivery records and goes past: failing here
		// would fail the task and leave its conductor running unwatched.
		// Nothing is known of the sink, so delivery sends again from the
		// checkpoint, and patch records the refusal if it stands.
		d.res.SinkProblem = err.Error()
		activity.GetLogger(ctx).Warn("the sink refused to show its brief; delivering again from the checkpoint",
			"task", d.req.TaskID, "error", err)
		return nil, nil
	}
	return held, nil
}

// deliveredIn is delivered for a brief already read.
func (d *delivery) deliveredIn(held map[string]any) (n int, matched bool, err error) {
	if held == nil {
		return 0, false, nil
	}
	if mapping.SinkHolds(held, &d.brief.Brief) {
		d.brief.ApplySpend(mapping.HeldSpend(held))
		return 0, true, nil
	}
	probe := d.brief.Clone()
	next := d.res.Next
	found := -1
	for read := 0; read < maxResumeBytes; {
		batch, err := tailer.ReadFrom(d.req.Plan.EventsPath, next.tailer(), maxBatchBytes)
		if err != nil {
			return 0, false, fmt.Errorf("read ahead in %s: %w", d.req.Plan.EventsPath, err)
		}
		if len(batch.Lines) == 0 {
			break
		}
		evs, _, _ := parseLines(batch.Lines, d.explain)
		for _, ev := range evs {
			if _, ok := probe.Reduce(ev); ok {
				n++
				if mapping.SinkHolds(held, &probe.Brief) {
					found = n
				}
			}
		}
		for _, l := range batch.Lines {
			read += len(l.Data) + 1
		}
		next = cursorOf(batch.Next)
	}
	if found < 0 {
		return 0, false, nil
	}
	// The costs a spend patch raised are the sink's: the events skipped
	// will not say them, and a later patch must not lower them.
	d.heldSpend = mapping.HeldSpend(held)
	return found, true, nil
}

// CatchUpRequest asks what the sink holds of an attempt's brief past the
// workflow's checkpoint Brief.
type CatchUpRequest struct {
	TaskID string             `json:"taskId"`
	Brief  mapping.BriefState `json:"brief"`
}

// CatchUpResult is the sink's brief when it is a later state of the
// attempt's (mapping.AheadOf), nil otherwise.
type CatchUpResult struct {
	Brief *mapping.Brief `json:"brief,omitempty"`
}

// CatchUpBrief reads the sink's brief for an attempt whose host was lost:
// its delivery there may have sent patches the workflow never heard of,
// and the patch that settles the attempt must start from them. It runs on
// any worker (the sink is shared) and writes nothing.
func (a *Activities) CatchUpBrief(ctx context.Context, req CatchUpRequest) (CatchUpResult, error) {
	held, err := a.Sink.CurrentBrief(ctx, req.TaskID)
	if err != nil {
		return CatchUpResult{}, sinkError("read the brief of task "+req.TaskID, err)
	}
	b, ok := mapping.AheadOf(held, &req.Brief)
	if !ok {
		return CatchUpResult{}, nil
	}
	return CatchUpResult{Brief: &b}, nil
}

// exitAfterTerminal bounds how long a delivery that read the plan's
// terminal event waits for the conductor to exit. The conductor writes
// that event last and exits a moment later; the workflow ends right after
// this delivery, so a conductor still running then would outlive its task.
const exitAfterTerminal = 5 * time.Second

// awaitExit waits for the conductor to exit after its terminal event, and
// stops it (TERM, the stop grace, KILL) if it does not within
// exitAfterTerminal; processes it left in its group are swept.
func (d *delivery) awaitExit(ctx context.Context) error {
	if d.req.Handle.PID <= 1 {
		return nil // no process of ours (a delivery of a recorded log)
	}
	h := d.req.Handle.proc()
	deadline := time.Now().Add(exitAfterTerminal)
	for {
		st, err := proc.Inspect(h)
		if err != nil {
			return fmt.Errorf("inspect conductor pid %d: %w", d.req.Handle.PID, err)
		}
		if !st.Alive {
			if st.GroupAlive {
				if swept := d.a.sweepLeftovers(ctx, d.req.Plan, d.req.Handle); swept != "" {
					return d.note(ctx, "sweep", swept)
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	grace := d.a.Config.StopGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	activities.Logger(ctx).Warn("the conductor still ran after its plan's terminal event; stopping it",
		"plan", d.req.Plan.Summary.Name, "pgid", d.req.Handle.PGID, "waited", exitAfterTerminal.String())
	if err := proc.Stop(ctx, h, grace); err != nil {
		return fmt.Errorf("stop conductor group %d of %s after its terminal event: %w",
			d.req.Handle.PGID, d.req.Plan.Summary.Name, err)
	}
	return nil
}
