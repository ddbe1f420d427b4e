package taskact

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/eventstream"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/traces"
)

// A task's trace (docs/traces.md). Spans are made only here, in
// activities, from what the workflow checkpointed or carried: a workflow's
// replay runs no activity, so it emits nothing. Every span's ids derive
// from the task, attempt, phase and event position (package traces), and
// the emitter's ledger drops what the collector already took, so a
// delivery retried from its checkpoint, on this worker or another, emits
// each span once.
//
// A phase attempt's spans (the agent, its model and tool calls from its
// transcript) are made when the delivery reads the phase's end event, and
// exported when the delivery takes its checkpoint, after the sink has the
// patches; an attempt's span and the task's come from the task's event
// stream, when a request carries the step that ends them.

// phaseEnd is a phase's end event as the delivery read it.
type phaseEnd struct {
	ev   mapping.Event
	seen time.Time
}

// notePhaseEnd keeps a phase's end for the checkpoint's spans.
func (d *delivery) notePhaseEnd(ev mapping.Event) {
	if d.a.Traces == nil || !traces.IsPhaseEnd(ev.Type) {
		return
	}
	d.phaseEnds = append(d.phaseEnds, phaseEnd{ev: ev, seen: time.Now()})
}

// emitPhases exports the spans of the phase attempts that ended in this
// call. A failure costs the spans, never the delivery: it is logged.
func (d *delivery) emitPhases(ctx context.Context) {
	if d.a.Traces == nil || len(d.phaseEnds) == 0 {
		return
	}
	id := traces.ForTask(d.req.TaskID, d.req.Base.PlanID)
	attempt := 1
	if d.req.Stream != nil && d.req.Stream.Attempt > 0 {
		attempt = d.req.Stream.Attempt
	}
	dir := planTranscripts(d.req.Plan)
	var spans []traces.Span
	for _, pe := range d.phaseEnds {
		run := traces.PhaseRun{ID: id, Attempt: attempt, Plan: d.req.Plan.Summary.Name, End: pe.ev, Seen: pe.seen}
		if pe.ev.Type != mapping.EventPhaseSkipped {
			if name, lines := phaseTranscript(dir, pe.ev.PhaseID, pe.ev.Attempt); name != "" {
				t := traces.ParseTranscript(lines)
				run.Transcript, run.TranscriptName = &t, name
			}
		}
		phase := traces.PhaseSpans(run)
		// The Temporal activity that delivered the phase's end, when the
		// SDK's interceptor traces it: the phase is its task's, not the
		// activity's, so it is a link, not the parent.
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			phase[0].Links = append(phase[0].Links, sc)
		}
		spans = append(spans, phase...)
	}
	if _, err := d.a.Traces.Emit(ctx, traceOwner(d.req.TaskID), spans); err != nil {
		activities.Logger(ctx).Warn("phase spans not exported", "task", d.req.TaskID, "spans", len(spans), "error", err)
		return
	}
	d.phaseEnds = nil
}

// traceOwner names a task's ledger of exported spans.
func traceOwner(taskID string) string { return canonical.RunIDForTask(taskID) }

// phaseTranscript is the transcript of a phase's attempt: edda writes one
// file per phase attempt, <phase>-<session8>.jsonl, so the phase's files
// in the order they were last written are its attempts in order. A phase
// with no file for the attempt has none ("").
func phaseTranscript(dir, phase string, attempt int) (string, [][]byte) {
	entries, err := os.ReadDir(dir)
	if err != nil || attempt < 1 {
		return "", nil
	}
	type file struct {
		name string
		mod  time.Time
	}
	var files []file
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), phase+"-")
		if !ok || e.IsDir() {
			continue
		}
		session, ok := strings.CutSuffix(rest, ".jsonl")
		if !ok || len(session) != 8 || strings.Contains(session, "-") {
			continue // another phase whose id starts with this one's
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, file{e.Name(), info.ModTime()})
	}
	slices.SortFunc(files, func(a, b file) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	if attempt > len(files) {
		return "", nil
	}
	name := files[attempt-1].name
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return "", nil
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxTranscriptLine)
	read := 0
	for sc.Scan() && read < maxTranscriptRead {
		read += len(sc.Bytes()) + 1
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	return name, lines
}

// traceSteps exports the spans of the attempts and the task that the
// steps a request carries end, read from the task's stream, where those
// steps were just stored. planID is the dispatch's (it names a run's
// task's run).
func (a *Activities) traceSteps(ctx context.Context, s *StreamInfo, taskID, planID string) {
	if a.Traces == nil || s == nil || !endsSomething(s.Steps) {
		return
	}
	st, err := a.store()
	if err != nil {
		return
	}
	evs, err := readTaskStream(ctx, st, s.RunID)
	if err != nil {
		activities.Logger(ctx).Warn("task spans not made: the stream was not read", "task", taskID, "error", err)
		return
	}
	spans := traces.StreamSpans(traces.ForTask(taskID, planID), evs)
	if _, err := a.Traces.Emit(ctx, traceOwner(taskID), spans); err != nil {
		activities.Logger(ctx).Warn("task spans not exported", "task", taskID, "spans", len(spans), "error", err)
	}
}

// endsSomething says whether steps end an attempt or the task.
func endsSomething(steps []canonical.Event) bool {
	for _, ev := range steps {
		switch {
		case ev.Type == canonical.TypeTaskDone && ev.AgentID == canonical.WorkflowAgent:
			return true
		case ev.Type == canonical.TypeTaskUpdate && bytes.Contains(ev.Payload, []byte(`"ended"`)):
			return true
		}
	}
	return false
}

// maxStreamRead bounds how much of a task's stream is read for its spans.
const maxStreamRead = 64 << 20

func readTaskStream(ctx context.Context, st *eventstream.Store, runID string) ([]canonical.Event, error) {
	var out []canonical.Event
	var from int64
	for from < maxStreamRead {
		p, err := st.Read(ctx, runID, from, eventstream.ReadOptions{MaxBytes: 1 << 20})
		if err != nil {
			return nil, err
		}
		if len(p.Lines) == 0 {
			break
		}
		for _, l := range p.Lines {
			if ev, err := canonical.Parse([]byte(l)); err == nil {
				out = append(out, ev)
			}
		}
		from = p.Next
	}
	return out, nil
}
