package taskact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/limits"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/mapping/redact"
)

// A usage limit shows only in the agent's transcript: Claude Code answers
// one with a success-shaped result, which edda takes for a finished phase,
// and edda discards the agent's stderr (docs/pauses.md). So while it
// delivers an attempt's events, the tail also follows the transcripts edda
// keeps per phase attempt, and on the first sign of a limit it stops the
// conductor at once with SIGINT (edda's graceful stop: the phase goes back
// to pending and the plan can be continued) before edda spends the phase's
// attempts on it or passes it with no work done. The limit is reported to
// the workflow at the checkpoint, which pauses the task.

// LimitWatch is what a delivery asks of the transcript watch and reports
// of it; it is embedded in DeliverRequest and DeliverResult.
type LimitWatch struct {
	// WatchLimits asks the tail to follow the transcripts; workflows that
	// began before it existed leave it off.
	WatchLimits bool `json:"watchLimits,omitempty"`
	// Transcripts is how far each transcript has been read: the
	// workflow's checkpoint on the way in, the new one on the way out.
	Transcripts TranscriptCursor `json:"transcripts,omitempty"`
	// Limit is the usage limit the transcripts showed, nil for none.
	Limit *UsageLimit `json:"limit,omitempty"`
}

// TranscriptCursor maps a transcript's file name to how far it was read.
type TranscriptCursor map[string]TranscriptMark

// TranscriptMark is the end of the last whole line read of a transcript;
// Skipping: the line after it is longer than limits.MaxLine and is being
// skipped to its end.
type TranscriptMark struct {
	Offset   int64 `json:"o"`
	Skipping bool  `json:"s,omitempty"`
}

// UsageLimit is a limit the agent met.
type UsageLimit struct {
	// Phase is the phase whose attempt met it; Transcript the file.
	Phase      string `json:"phase"`
	Transcript string `json:"transcript"`
	// ResetAt is when it lifts (UTC), zero when unknown.
	ResetAt time.Time `json:"resetAt,omitzero"`
	// Source names the sign or pattern that recognised it; Text is a short
	// excerpt, secrets masked.
	Source string    `json:"source"`
	Text   string    `json:"text,omitempty"`
	SeenAt time.Time `json:"seenAt"`
	// Interrupted: the tail sent the conductor SIGINT.
	Interrupted bool `json:"interrupted,omitempty"`
}

// limitPoll is how often the transcripts are looked at while a delivery
// runs without inotify: a limited agent answers at once and edda retries
// at once, so a limit must be seen within a fraction of a second. With
// inotify they are read when they change, and looked at every
// limitRecheck besides, in case a notification was lost.
const (
	limitPoll    = 100 * time.Millisecond
	limitRecheck = 2 * time.Second
)

// maxTranscriptRead bounds one read of one transcript.
const maxTranscriptRead = 4 << 20

// planTranscripts is where edda keeps the plan's transcripts.
func planTranscripts(plan PlanInfo) string {
	return filepath.Join(filepath.Dir(plan.EventsPath), transcriptsDir)
}

// watchLimits follows the transcripts while the delivery runs, when the
// request asks for it. The function it returns stops the watch, reads the
// transcripts once more to their end, and records the cursor and any limit
// in the delivery's result.
func (d *delivery) watchLimits(ctx context.Context) func() {
	if !d.req.WatchLimits || d.req.Plan.EventsPath == "" {
		return func() {}
	}
	w := &limitWatcher{
		det: d.a.Config.Limits, dir: planTranscripts(d.req.Plan),
		cursor: copyCursor(d.req.Transcripts), limit: d.req.Limit, handle: d.req.Handle,
	}
	if w.det == nil {
		w.det = limits.Default()
	}
	d.limits = w
	done := make(chan struct{})
	stopped := make(chan struct{})
	// A running task is followed for as long as it runs: the watch must
	// cost next to nothing while its agent writes nothing.
	changed, err := tailer.NewDirWaiter(w.dir)
	var wake <-chan struct{}
	every := limitPoll
	if err == nil {
		if changed.Watching() != "" {
			wake, every = changed.Wake(), limitRecheck
		}
	}
	go func() {
		defer close(stopped)
		if changed != nil {
			defer changed.Close()
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			w.scan(ctx)
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-wake:
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		w.scan(ctx)
		d.res.Transcripts = w.cursor
		d.res.WatchLimits = true
		d.res.Limit = w.limit
	}
}

func copyCursor(c TranscriptCursor) TranscriptCursor {
	out := make(TranscriptCursor, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

type limitWatcher struct {
	mu     sync.Mutex
	det    *limits.Detector
	dir    string
	cursor TranscriptCursor
	limit  *UsageLimit
	handle ConductorHandle
	// progress is when a transcript was last seen to grow (stall.go).
	progress time.Time
}

// scan reads what the transcripts gained since the last look. The first
// limit found stops the conductor; later lines are still read past, so a
// resumed run's watch starts after them.
func (w *limitWatcher) scan(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	files, err := filepath.Glob(filepath.Join(w.dir, "*.jsonl"))
	if err != nil {
		return
	}
	slices.Sort(files)
	for _, f := range files {
		name := filepath.Base(f)
		mark, v, err := readTranscript(f, w.cursor[name], w.det, time.Now())
		if err != nil {
			activities.Logger(ctx).Warn("transcript not read", "path", f, "error", err)
			continue
		}
		if mark != w.cursor[name] {
			w.progress = time.Now()
		}
		w.cursor[name] = mark
		if v.Limited && w.limit == nil {
			w.limit = &UsageLimit{
				Phase: phaseOfTranscript(name), Transcript: name, ResetAt: v.ResetAt,
				Source: v.Source, Text: v.Text, SeenAt: time.Now().UTC(),
			}
			w.interrupt(ctx)
		}
	}
}

// judgeEvent reads a phase_failed error as free text: agents that exit
// non-zero on a limit (or wrappers around them) may put its message there.
// A failing check's output is not read as a limit unless a named pattern
// matches (limits.Detector.Text).
func (d *delivery) judgeEvent(ctx context.Context, ev mapping.Event) {
	w := d.limits
	if w == nil || ev.Type != mapping.EventPhaseFailed || ev.Error == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.limit != nil {
		return
	}
	// The text was written when the event was: a printed time of day
	// ("try again at 3:42 PM") is the next such time after that, not after
	// this read, which may come later (a slow delivery, a resumed one).
	seen := time.Now()
	if at, err := time.Parse(time.RFC3339Nano, ev.TS); err == nil && at.Before(seen) {
		seen = at
	}
	if v := w.det.Text(ev.Error, seen); v.Limited {
		w.limit = &UsageLimit{Phase: ev.PhaseID, ResetAt: v.ResetAt, Source: v.Source, Text: v.Text, SeenAt: time.Now().UTC()}
		w.interrupt(ctx)
	}
}

// interrupt stops the conductor gracefully, at once.
func (w *limitWatcher) interrupt(ctx context.Context) {
	if w.handle.PID == 0 {
		return
	}
	if err := proc.Interrupt(w.handle.proc()); err != nil {
		activities.Logger(ctx).Warn("conductor not interrupted on a usage limit", "pid", w.handle.PID, "error", err)
		return
	}
	w.limit.Interrupted = true
	activities.Logger(ctx).Warn("usage limit: conductor interrupted", "phase", w.limit.Phase,
		"source", w.limit.Source, "resetAt", w.limit.ResetAt)
}

// phaseOfTranscript is the phase id in <phase>-<session8>.jsonl.
func phaseOfTranscript(name string) string {
	base := strings.TrimSuffix(name, ".jsonl")
	if i := strings.LastIndexByte(base, '-'); i > 0 {
		return base[:i]
	}
	return base
}

// readTranscript judges the whole lines of path after mark and returns the
// new mark and the first limit among them. A partial last line is left
// for the next read.
func readTranscript(path string, mark TranscriptMark, det *limits.Detector, now time.Time) (TranscriptMark, limits.Verdict, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return mark, limits.Verdict{}, nil
		}
		return mark, limits.Verdict{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return mark, limits.Verdict{}, err
	}
	var found limits.Verdict
	for size := fi.Size(); size > mark.Offset; {
		// Only what was written since: a transcript is looked at whenever
		// anything in its directory changes.
		buf := make([]byte, min(size-mark.Offset, maxTranscriptRead))
		n, err := f.ReadAt(buf, mark.Offset)
		if err != nil && !errors.Is(err, io.EOF) {
			return mark, found, err
		}
		buf = buf[:n]
		last := bytes.LastIndexByte(buf, '\n')
		if last < 0 {
			if n >= limits.MaxLine {
				// A line too long to be a sign: skip what there is of it.
				mark.Offset += int64(n)
				mark.Skipping = true
				continue
			}
			return mark, found, nil
		}
		lines := buf[:last+1]
		for len(lines) > 0 {
			i := bytes.IndexByte(lines, '\n')
			line := lines[:i]
			lines = lines[i+1:]
			if mark.Skipping {
				mark.Skipping = false
				continue
			}
			if !found.Limited && len(line) <= limits.MaxLine {
				if v := det.Line(line, now); v.Limited {
					found = v
				}
			}
		}
		mark.Offset += int64(last + 1)
		if n < maxTranscriptRead {
			return mark, found, nil
		}
	}
	return mark, found, nil
}

// InterruptRequest stops a conductor gracefully.
type InterruptRequest struct {
	Plan   PlanInfo        `json:"plan"`
	Handle ConductorHandle `json:"handle"`
}

// InterruptConductor sends the conductor SIGINT, edda's graceful stop (the
// phase under way goes back to pending and the plan can be continued), and
// waits for it to exit; one that does not within the stop grace is stopped
// as AbortConductor does, without marking the plan aborted.
func (a *Activities) InterruptConductor(ctx context.Context, req InterruptRequest) error {
	stopBeat := activities.Heartbeat(ctx, activities.HeartbeatEvery)
	defer stopBeat()
	grace := a.Config.StopGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	h := req.Handle.proc()
	if err := proc.Interrupt(h); err != nil {
		return fmt.Errorf("interrupt conductor of %s: %w", req.Plan.Summary.Name, err)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		st, err := proc.Inspect(h)
		if err != nil {
			return fmt.Errorf("inspect conductor pid %d: %w", req.Handle.PID, err)
		}
		if !st.Alive {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	activities.Logger(ctx).Warn("conductor did not stop on SIGINT; stopping its process group",
		"plan", req.Plan.Summary.Name, "pgid", req.Handle.PGID)
	if err := proc.Stop(ctx, h, grace); err != nil {
		return fmt.Errorf("stop conductor group %d of %s: %w", req.Handle.PGID, req.Plan.Summary.Name, err)
	}
	return nil
}

// ResumeRequest continues a paused attempt's plan.
type ResumeRequest struct {
	Plan PlanInfo `json:"plan"`
	// Resume numbers the resumption within the attempt (1, 2, ...): each
	// runs the conductor in a run directory of its own.
	Resume int `json:"resume"`
}

// ResumeResult is the conductor that continues the plan.
type ResumeResult struct {
	// Conductor is nil when it could not start; StartError says why.
	Conductor  *ConductorHandle `json:"conductor,omitempty"`
	StartError string           `json:"startError,omitempty"`
	// Retried are the phases reset to pending with `conduct retry`.
	Retried []string `json:"retried,omitempty"`
}

// ResumeConductor continues the same plan after a pause: every failed or
// stale phase is reset with `conduct retry` (a rerun of an existing plan
// stops at one until then; the phases that passed are not run again), and
// `conduct run` of the plan starts in a run directory of its own. A retry
// of this activity re-attaches to the conductor it started.
func (a *Activities) ResumeConductor(ctx context.Context, req ResumeRequest) (ResumeResult, error) {
	var res ResumeResult
	if req.Resume < 1 {
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("resume number %d: want 1 or more", req.Resume), activities.ErrInvalidDispatch, nil)
	}
	bin, err := exec.LookPath(a.Config.Conductor)
	if err != nil {
		res.StartError = fmt.Sprintf("conductor %q not found: %v", a.Config.Conductor, err)
		return res, nil
	}
	dir := fmt.Sprintf("%s-resume-%d", req.Plan.RunDir, req.Resume)
	if h, ok, err := proc.Recorded(dir); err != nil {
		return res, fmt.Errorf("read run record %s: %w", dir, err)
	} else if ok {
		ch := handleOf(h)
		res.Conductor = &ch
		return res, nil
	}
	if cs, _ := readState(req.Plan.StatePath, func(_ string, _ *int, m string) string { return m }); cs != nil {
		for _, ph := range cs.Phases {
			if ph.Status != "failed" && ph.Status != "stale" {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			cmd := a.conductorCommand(cctx, bin, req.Plan, "retry", ph.ID, "--plan", req.Plan.Summary.Name)
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				activities.Logger(ctx).Warn("conduct retry failed", "plan", req.Plan.Summary.Name, "phase", ph.ID,
					"error", err, "output", shorten(redact.String(string(out))))
				continue
			}
			res.Retried = append(res.Retried, ph.ID)
		}
	}
	h, _, err := proc.Start(proc.Spec{
		Dir:     dir,
		Cwd:     req.Plan.Cwd,
		Command: conductorRun(bin, req.Plan),
		Env:     conductorEnv(a.Config.ConductorEnv),
	})
	if err != nil {
		return res, fmt.Errorf("resume conductor for %s: %w", req.Plan.Summary.Name, err)
	}
	ch := handleOf(h)
	res.Conductor = &ch
	activities.Logger(ctx).Warn("conductor resumed after a pause", "plan", req.Plan.Summary.Name, "pid", h.PID, "retried", res.Retried)
	return res, nil
}
