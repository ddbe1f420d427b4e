package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/mapping/redact"
)

// Config is the worker-side configuration of the activities. Nothing here
// comes from workflow input: secrets and paths belong to the operator.
type Config struct {
	// WorkRoot holds every task's work directory and run records; nothing
	// this worker writes may land outside it.
	WorkRoot string
	// Conductor is the edda binary (or the simulator): it is run as
	// `<Conductor> conduct run <plan> --cwd <dir> --json`.
	Conductor string
	// ConductorEnv is added to the conductor's environment.
	ConductorEnv []string
	Templates    mapping.TemplateSet
	// StopGrace is how long a stopped conductor gets between TERM and KILL.
	StopGrace time.Duration
	// TailLinger batches a burst of lines into one result.
	TailLinger time.Duration
	// TailPoll is the fallback poll interval when file notifications are missed.
	TailPoll time.Duration
}

// Activities are the side effects of TaskWorkflow. Register one value with
// the worker; the workflow refers to the methods through a nil pointer.
type Activities struct {
	Config Config
	Sink   sink.Sink

	// plans caches parsed plan.yaml files by path: a plan file never changes
	// once written (its name changes with every attempt).
	plans sync.Map
	// patchProgress: acknowledged patches of a batch being retried (patch.go).
	patchProgress sync.Map // "runID/activityID" -> int
}

// secretEnv names environment variables of the worker that must not reach the
// conductor and its agents: the karvi token and the payload codec key.
var secretEnv = []string{"KARVI_API_TOKEN", "KARVI_TEMPORAL_CODEC_KEY"}

const (
	maxBatchBytes = 256 << 10
	// maxDrainBytes bounds one result when the conductor has exited, so a
	// huge backlog arrives in several results instead of one oversized
	// history payload.
	maxDrainBytes  = 1 << 20
	heartbeatEvery = time.Second
	sampleLen      = 200
	logTailBytes   = 2048
)

// PreparePlan builds the plan.yaml of one attempt and writes it under the
// work root. It is idempotent: the same request writes the same file.
func (a *Activities) PreparePlan(ctx context.Context, req PrepareRequest) (PlanInfo, error) {
	d := req.Dispatch
	if err := d.Validate(); err != nil {
		return PlanInfo{}, invalidDispatch(err)
	}
	tmpl, err := a.Config.Templates.Select(d)
	if err != nil {
		return PlanInfo{}, invalidDispatch(err)
	}
	plan, err := mapping.BuildPlan(d, req.Attempt, tmpl)
	if err != nil {
		return PlanInfo{}, invalidDispatch(err)
	}
	data, err := mapping.MarshalPlan(plan)
	if err != nil {
		return PlanInfo{}, invalidDispatch(err)
	}
	layout, err := NewLayout(a.Config.WorkRoot)
	if err != nil {
		return PlanInfo{}, err
	}
	cwd, err := layout.TaskCwd(d)
	if err != nil {
		return PlanInfo{}, invalidDispatch(err)
	}
	runDir, err := layout.RunDir(d.TaskID, plan.Name)
	if err != nil {
		return PlanInfo{}, invalidDispatch(err)
	}
	for _, dir := range []string{cwd, runDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return PlanInfo{}, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	planPath := filepath.Join(runDir, "plan.yaml")
	if err := writeFileAtomic(planPath, data); err != nil {
		return PlanInfo{}, err
	}
	stateDir := filepath.Join(cwd, ".edda", "conductor", plan.Name)
	return PlanInfo{
		Summary:    plan.Summary(),
		PlanPath:   planPath,
		Cwd:        cwd,
		RunDir:     runDir,
		EventsPath: filepath.Join(stateDir, "events.jsonl"),
		StatePath:  filepath.Join(stateDir, "state.json"),
	}, nil
}

// StartConductor spawns the conductor detached, in its own process group, or
// re-attaches to the run already recorded for this plan: a retried or
// replayed start never launches a second conductor for the same attempt.
func (a *Activities) StartConductor(ctx context.Context, req StartRequest) (proc.Handle, error) {
	bin, err := exec.LookPath(a.Config.Conductor)
	if err != nil {
		return proc.Handle{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("conductor %q not found: %v", a.Config.Conductor, err), ErrConductorStart, err)
	}
	h, attached, err := proc.Start(proc.Spec{
		Dir:     req.Plan.RunDir,
		Cwd:     req.Plan.Cwd,
		Command: []string{bin, "conduct", "run", req.Plan.PlanPath, "--cwd", req.Plan.Cwd, "--json"},
		Env:     conductorEnv(a.Config.ConductorEnv),
	})
	if err != nil {
		return proc.Handle{}, fmt.Errorf("start conductor for %s: %w", req.Plan.Summary.Name, err)
	}
	activity.GetLogger(ctx).Info("conductor running", "plan", req.Plan.Summary.Name,
		"pid", h.PID, "attached", attached)
	return h, nil
}

// conductorEnv is the worker's environment without its secrets, plus extra.
func conductorEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		secret := false
		for _, s := range secretEnv {
			if name == s {
				secret = true
			}
		}
		if !secret {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TailEvents long-polls the event log from the cursor. It returns as soon as
// complete new lines exist, when the conductor has exited (then with the log
// read to its end and state.json), or after MaxWait with nothing. A MaxWait
// of zero reads what is there without waiting.
func (a *Activities) TailEvents(ctx context.Context, req TailRequest) (TailResult, error) {
	stopBeat := heartbeat(ctx, heartbeatEvery)
	defer stopBeat()

	exited := func() bool {
		st, err := proc.Inspect(req.Handle)
		return err == nil && !st.Alive
	}
	var batch tailer.Batch
	var err error
	if req.MaxWait > 0 {
		batch, err = tailer.Wait(ctx, req.Plan.EventsPath, req.Cursor, tailer.WaitOptions{
			MaxWait:  req.MaxWait,
			Linger:   a.Config.TailLinger,
			Poll:     a.Config.TailPoll,
			MaxBytes: maxBatchBytes,
			Stop:     exited,
		})
	} else {
		batch, err = tailer.ReadFrom(req.Plan.EventsPath, req.Cursor, maxBatchBytes)
	}
	if err != nil {
		return TailResult{}, fmt.Errorf("read %s: %w", req.Plan.EventsPath, err)
	}
	res := TailResult{Next: batch.Next, Truncated: batch.Truncated, Missing: batch.Missing}
	explain := a.explainer(req.Plan.PlanPath)
	collect(&res, batch.Lines, explain)

	st, err := proc.Inspect(req.Handle)
	if err != nil {
		return TailResult{}, fmt.Errorf("inspect conductor pid %d: %w", req.Handle.PID, err)
	}
	if st.Alive {
		return res, nil
	}
	// The conductor is gone, so the log can only have complete lines left
	// (plus perhaps a torn last one). Read them all, then the final state.
	read := 0
	for read < maxDrainBytes {
		more, err := tailer.ReadFrom(req.Plan.EventsPath, res.Next, maxBatchBytes)
		if err != nil {
			return TailResult{}, fmt.Errorf("drain %s: %w", req.Plan.EventsPath, err)
		}
		if len(more.Lines) == 0 {
			break
		}
		res.Next = more.Next
		res.Truncated = res.Truncated || more.Truncated
		for _, l := range more.Lines {
			read += len(l.Data) + 1
		}
		collect(&res, more.Lines, explain)
	}
	if read >= maxDrainBytes {
		// More is waiting: report the process as running for one more round
		// so the workflow keeps draining before it decides the outcome.
		return res, nil
	}
	res.Exited = true
	res.ExitCode = st.ExitCode
	res.State, res.StateError = readState(req.Plan.StatePath, explain)
	res.LogTail = readLogTail(req.Handle.LogPath)
	return res, nil
}

// explainFunc rewrites a phase failure message so that a person can read
// it (see mapping.DescribeCheckFailure).
type explainFunc func(phaseID string, checkIndex *int, message string) string

// explainer reads the plan once so failures can name the check that failed.
// Without a readable plan, messages pass through unchanged.
func (a *Activities) explainer(planPath string) explainFunc {
	var plan *mapping.Plan
	if cached, ok := a.plans.Load(planPath); ok {
		plan = cached.(*mapping.Plan)
	} else if data, err := os.ReadFile(planPath); err == nil {
		if p, err := mapping.ParsePlan(data); err == nil {
			plan = &p
			a.plans.Store(planPath, plan)
		}
	}
	return func(phaseID string, checkIndex *int, message string) string {
		if plan == nil {
			return message
		}
		for _, ph := range plan.Phases {
			if ph.ID == phaseID {
				if c, ok := ph.FailedCheck(checkIndex); ok {
					return mapping.DescribeCheckFailure(c, message)
				}
			}
		}
		return message
	}
}

// collect parses lines into events, redacting every free-text field before
// it can reach workflow history; malformed lines are counted, not fatal.
func collect(res *TailResult, lines []tailer.Line, explain explainFunc) {
	for _, l := range lines {
		if l.TooLong {
			res.Malformed++
			res.MalformedSample = fmt.Sprintf("line at offset %d is %d bytes, longer than the tail accepts", l.Offset, l.Length)
			continue
		}
		// Redact the raw line before parsing: ParseEvent cuts long text,
		// and a secret cut in half no longer looks like one; every string
		// of the line (ts and an unknown type included) is covered.
		ev, err := mapping.ParseEvent(redact.JSON(l.Data))
		if err != nil {
			res.Malformed++
			res.MalformedSample = shorten(redact.String(fmt.Sprintf("offset %d: %v: %s", l.Offset, err, l.Data)))
			continue
		}
		ev.Pos = mapping.Position{Gen: l.Gen, Offset: l.Offset}
		if ev.Type == mapping.EventPhaseFailed && ev.ErrorType != mapping.ErrAgentCrash {
			ev.Error = explain(ev.PhaseID, nil, ev.Error)
		}
		ev.MapText(redact.String)
		res.Events = append(res.Events, ev)
	}
}

func readState(path string, explain explainFunc) (*mapping.ConductorState, string) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "state.json missing"
		}
		return nil, shorten(redact.String(err.Error()))
	}
	// Everything in state.json comes from the conductor, phase ids and
	// statuses included, and phase ids reach lastError: redact it whole.
	cs, err := mapping.ParseConductorState(redact.JSON(data))
	if err != nil {
		return nil, shorten(redact.String("state.json unreadable: " + err.Error()))
	}
	for i := range cs.Phases {
		if e := cs.Phases[i].Error; e != nil {
			if e.ErrorType == mapping.ErrCheckFailed {
				e.Message = explain(cs.Phases[i].ID, e.CheckIndex, e.Message)
			}
			e.Message = redact.String(e.Message)
		}
		cs.Phases[i].SkipReason = redact.String(cs.Phases[i].SkipReason)
	}
	return &cs, ""
}

// readLogTail returns the last lines the conductor printed, redacted.
func readLogTail(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	off := info.Size() - logTailBytes
	if off < 0 {
		off = 0
	}
	buf := make([]byte, info.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	if off > 0 {
		// The window starts inside a line: drop that piece, since a secret
		// cut at its start would not be recognised and its tail would show.
		nl := bytes.IndexByte(buf, '\n')
		if nl < 0 {
			return ""
		}
		buf = buf[nl+1:]
	}
	var lines []string
	for _, l := range strings.Split(string(buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return shorten(redact.String(strings.Join(lines, " | ")))
}

func shorten(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\\0")
	if len(s) <= sampleLen {
		return s
	}
	cut := sampleLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// PatchBrief sends the patches in order. A retried batch resumes after the
// patches already delivered (see patchProgress), so karvi sees each patch
// once and in order unless the worker crashed mid-batch; even then each
// patch is idempotent under karvi's merge (the log travels whole), so the
// brief converges.
func (a *Activities) PatchBrief(ctx context.Context, req PatchRequest) error {
	return a.sendPatches(ctx, req)
}

// SetTaskStatus writes the task status; the sink walks karvi's legal
// transitions and is a no-op when the task already has the status.
func (a *Activities) SetTaskStatus(ctx context.Context, req StatusRequest) error {
	if err := a.Sink.SetStatus(ctx, req.TaskID, req.Update); err != nil {
		return sinkError(fmt.Sprintf("set task %s status %s", req.TaskID, req.Update.Status), err)
	}
	return nil
}

// sinkError marks what no retry can fix as non-retryable, with karvi's own
// message; everything else (refused connections, 5xx) stays retryable.
func sinkError(op string, err error) error {
	msg := fmt.Sprintf("%s: %v", op, err)
	switch {
	case karvi.IsNoBrief(err):
		return temporal.NewNonRetryableApplicationError(msg, ErrNoBrief, err)
	case karvi.IsRetryable(err):
		return fmt.Errorf("%s: %w", op, err)
	case karvi.IsPermanent(err):
		return temporal.NewNonRetryableApplicationError(msg, ErrSinkRejected, err)
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
}

// AbortConductor stops the conductor's whole process group (TERM, then KILL
// after the grace period) and then marks the plan aborted with `conduct
// abort`, so that a later `conduct run` of the same plan exits at once. The
// order matters: a running edda never re-reads state.json and its next save
// would undo an abort written while it still runs.
func (a *Activities) AbortConductor(ctx context.Context, req AbortRequest) error {
	stopBeat := heartbeat(ctx, heartbeatEvery)
	defer stopBeat()
	logger := activity.GetLogger(ctx)

	grace := a.Config.StopGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	if err := proc.Stop(ctx, req.Handle, grace); err != nil {
		return fmt.Errorf("stop conductor group %d of %s: %w", req.Handle.PGID, req.Plan.Summary.Name, err)
	}
	logger.Info("conductor stopped", "plan", req.Plan.Summary.Name, "pgid", req.Handle.PGID)

	if bin, err := exec.LookPath(a.Config.Conductor); err == nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, bin, "conduct", "abort", req.Plan.Summary.Name)
		cmd.Dir = req.Plan.Cwd
		cmd.Env = conductorEnv(a.Config.ConductorEnv)
		if out, err := cmd.CombinedOutput(); err != nil {
			// Best effort: the plan may have no state yet, or be finished;
			// the process group is already gone either way.
			logger.Warn("conduct abort failed", "plan", req.Plan.Summary.Name,
				"error", err, "output", shorten(redact.String(string(out))))
		}
	}
	return nil
}

// heartbeat records a heartbeat now and then every interval until stopped,
// so the server notices a dead worker within the heartbeat timeout and the
// activity learns of its cancellation.
func heartbeat(ctx context.Context, every time.Duration) func() {
	activity.RecordHeartbeat(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

func invalidDispatch(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidDispatch, err)
}
