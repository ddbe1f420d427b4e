package taskact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/mapping/redact"
)

// TailCursor is how far the workflow has consumed a plan's event log. It
// is the workflow's own record, converted to and from the tailer's cursor:
// the zero value reads from the start of whatever file is there.
type TailCursor struct {
	// Gen counts restarts from offset 0 after the file was truncated or
	// replaced; (Gen, offset) identifies a line uniquely.
	Gen int `json:"gen"`
	// Offset is the byte offset of the first byte not yet consumed.
	Offset int64 `json:"offset"`
	// Ino, HeadLen and HeadSum identify the file the offset belongs to, so
	// a replaced file is noticed even when it reuses the inode number.
	Ino     uint64 `json:"ino,omitempty"`
	HeadLen int    `json:"headLen,omitempty"`
	HeadSum uint32 `json:"headSum,omitempty"`
	// Skipping and SkipFrom follow a line longer than the tail accepts
	// until its end, so it is reported once.
	Skipping bool  `json:"skipping,omitempty"`
	SkipFrom int64 `json:"skipFrom,omitempty"`
}

func cursorOf(c tailer.Cursor) TailCursor { return TailCursor(c) }

func (c TailCursor) tailer() tailer.Cursor { return tailer.Cursor(c) }

// TailRequest asks for the event lines after Cursor, waiting at most MaxWait.
type TailRequest struct {
	Plan    PlanInfo        `json:"plan"`
	Handle  ConductorHandle `json:"handle"`
	Cursor  TailCursor      `json:"cursor"`
	MaxWait time.Duration   `json:"maxWait"`
}

// TailResult carries parsed, redacted events and what is known about the
// conductor process. When Exited is set the log has been read to its end.
type TailResult struct {
	Events    []mapping.Event `json:"events,omitempty"`
	Next      TailCursor      `json:"next"`
	Malformed int             `json:"malformed,omitempty"`
	// MalformedSample is the (redacted, shortened) text of the last malformed
	// line in this batch, so a person can see what the conductor wrote.
	MalformedSample string `json:"malformedSample,omitempty"`
	Truncated       bool   `json:"truncated,omitempty"`
	Missing         bool   `json:"missing,omitempty"`
	ConductorEnd
}

// ConductorEnd is what a conductor that is gone left behind. When Exited
// is set its log has been read to the end.
type ConductorEnd struct {
	Exited   bool `json:"exited,omitempty"`
	ExitCode int  `json:"exitCode,omitempty"`
	// State is the conductor's state.json once it has exited; StateError says
	// why it could not be read when it is nil.
	State      *mapping.ConductorState `json:"state,omitempty"`
	StateError string                  `json:"stateError,omitempty"`
	// Stderr is the end of the conductor's standard error, LogTail the end
	// of its standard output without the event lines it copies there
	// (--json); both redacted. They are the only place some outcomes
	// (a crash, budget, max turns) are explained.
	Stderr  string `json:"stderr,omitempty"`
	LogTail string `json:"logTail,omitempty"`
	// Stopped is the runtime's own stop of the conductor (the fence's, or
	// another attempt's start), nil for none: it explains the end.
	Stopped *mapping.RuntimeStop `json:"stopped,omitempty"`
}

// endOf reads what a gone conductor left: its state and its last output.
func endOf(plan PlanInfo, h ConductorHandle, exitCode int, explain explainFunc) ConductorEnd {
	e := ConductorEnd{Exited: true, ExitCode: exitCode}
	e.State, e.StateError = readState(plan.StatePath, explain)
	e.Stderr = readLogTail(h.StderrPath)
	e.LogTail = readLogTail(h.LogPath)
	e.Stopped = readStopRecord(h)
	return e
}

// Exit is the end as the outcome rules read it.
func (e ConductorEnd) Exit() mapping.ConductorExit {
	return mapping.ConductorExit{ExitCode: e.ExitCode, State: e.State, StateError: e.StateError,
		Stderr: e.Stderr, Output: e.LogTail, Stopped: e.Stopped}
}

// TailEvents long-polls the event log from the cursor. It returns as soon as
// complete new lines exist, when the conductor has exited (then with the log
// read to its end and state.json), or after MaxWait with nothing. A MaxWait
// of zero reads what is there without waiting.
func (a *Activities) TailEvents(ctx context.Context, req TailRequest) (TailResult, error) {
	stopBeat := activities.Heartbeat(ctx, activities.HeartbeatEvery)
	defer stopBeat()

	exited := func() bool {
		st, err := proc.Inspect(req.Handle.proc())
		return err == nil && !st.Alive
	}
	var batch tailer.Batch
	var err error
	if req.MaxWait > 0 {
		batch, err = tailer.Wait(ctx, req.Plan.EventsPath, req.Cursor.tailer(), tailer.WaitOptions{
			MaxWait:  req.MaxWait,
			Linger:   a.Config.TailLinger,
			Poll:     a.Config.TailPoll,
			MaxBytes: maxBatchBytes,
			Stop:     exited,
		})
	} else {
		batch, err = tailer.ReadFrom(req.Plan.EventsPath, req.Cursor.tailer(), maxBatchBytes)
	}
	if err != nil {
		return TailResult{}, fmt.Errorf("read %s: %w", req.Plan.EventsPath, err)
	}
	res := TailResult{Next: cursorOf(batch.Next), Truncated: batch.Truncated, Missing: batch.Missing}
	explain := a.explainer(req.Plan.PlanPath)
	collect(&res, batch.Lines, explain)

	st, err := proc.Inspect(req.Handle.proc())
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
		more, err := tailer.ReadFrom(req.Plan.EventsPath, res.Next.tailer(), maxBatchBytes)
		if err != nil {
			return TailResult{}, fmt.Errorf("drain %s: %w", req.Plan.EventsPath, err)
		}
		if len(more.Lines) == 0 {
			break
		}
		res.Next = cursorOf(more.Next)
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
	a.sweepLeftovers(ctx, req.Plan, req.Handle)
	res.ConductorEnd = endOf(req.Plan, req.Handle, st.ExitCode, explain)
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

// collect parses lines into the result's events (see parseLines).
func collect(res *TailResult, lines []tailer.Line, explain explainFunc) {
	evs, malformed, sample := parseLines(lines, explain)
	res.Events = append(res.Events, evs...)
	res.Malformed += malformed
	if sample != "" {
		res.MalformedSample = sample
	}
}

// parseLines parses lines into events, redacting every free-text field
// before it can reach a sink or workflow history; malformed lines are
// counted, not fatal, and the last one is kept as a sample for a person.
func parseLines(lines []tailer.Line, explain explainFunc) (evs []mapping.Event, malformed int, sample string) {
	for _, l := range lines {
		if l.TooLong {
			malformed++
			sample = fmt.Sprintf("line at offset %d is %d bytes, longer than the tail accepts", l.Offset, l.Length)
			continue
		}
		// Redact the raw line before parsing: ParseEvent cuts long text,
		// and a secret cut in half no longer looks like one; every string
		// of the line (ts and an unknown type included) is covered.
		ev, err := mapping.ParseEvent(redact.JSON(l.Data))
		if err != nil {
			malformed++
			sample = shorten(redact.String(fmt.Sprintf("offset %d: %v: %s", l.Offset, err, l.Data)))
			continue
		}
		ev.Pos = mapping.Position{Gen: l.Gen, Offset: l.Offset}
		if ev.Type == mapping.EventPhaseFailed && ev.ErrorType != mapping.ErrAgentCrash {
			ev.Error = explain(ev.PhaseID, nil, ev.Error)
		}
		ev.MapText(redact.String)
		evs = append(evs, ev)
	}
	return evs, malformed, sample
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

// readLogTail returns the last lines the conductor printed to one of its
// outputs, redacted, leaving out event lines: with --json the conductor
// copies every event to stdout, and they say nothing the brief does not
// (runs recorded before stderr had a file of their own mix both there).
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
		if l = strings.TrimSpace(l); l != "" && !isEventLine(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return shorten(redact.String(strings.Join(lines, " | ")))
}

// isEventLine reports a line that is a JSON object: an event the conductor
// copied to its output, or the torn start of one.
func isEventLine(l string) bool {
	return strings.HasPrefix(l, `{"`) || strings.HasPrefix(l, "{") && json.Valid([]byte(l))
}
