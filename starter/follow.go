package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/errtext"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runview"
)

// follow is the view of a running task a person keeps open: one line
// whenever something changes (elapsed time, a progress bar of phases done,
// the current phase and its status, the attempt, the cost so far), then a
// summary when the task ends. Colours only go to a terminal; -json prints
// one object per change for machines instead.

// followPoll is how often the status query is asked while following.
const followPoll = 200 * time.Millisecond

// followOptions says how a follow prints.
type followOptions struct {
	// JSON prints one JSON object per change and one for the end.
	JSON bool
	// Color marks statuses with ANSI colours: only for a terminal.
	Color bool
}

// followOptionsFor picks the colours when w is a terminal.
func followOptionsFor(w io.Writer, jsonOut bool) followOptions {
	return followOptions{JSON: jsonOut, Color: !jsonOut && isTerminal(w)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// followTask prints the task's progress until its workflow closes, then
// how it ended.
func followTask(ctx context.Context, cl client.Client, taskID string, stdout io.Writer, o followOptions) error {
	done := make(chan error, 1)
	var res taskapi.Result
	go func() {
		var err error
		res, err = taskapi.Tasks{Client: cl}.Result(ctx, taskID, "")
		done <- err
	}()
	var last progress
	seen := false
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("task %s: %s", taskID, errtext.Root(err))
			}
			return o.print(stdout, summaryOf(res, time.Now()))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			var s taskapi.Status
			if err := query(ctx, cl, taskID, taskapi.QueryStatus, &s); err != nil {
				continue // the workflow may be between runs (continue-as-new)
			}
			p := progressOf(s, time.Now())
			if seen && p.sameAs(last) {
				continue
			}
			if err := o.print(stdout, p); err != nil {
				return err
			}
			last, seen = p, true
		}
	}
}

// print writes one progress line or the final summary.
func (o followOptions) print(w io.Writer, v interface{ line(color bool) string }) error {
	if o.JSON {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode progress: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	}
	_, err := fmt.Fprintln(w, v.line(o.Color))
	return err
}

// progress is one change of a task under way.
type progress struct {
	ElapsedMS   int64              `json:"elapsedMs"`
	Attempt     int                `json:"attempt"`
	Stage       taskapi.Stage      `json:"stage"`
	Plan        string             `json:"plan,omitempty"`
	Phase       string             `json:"phase,omitempty"`
	PhaseStatus string             `json:"phaseStatus,omitempty"`
	Done        int                `json:"phasesDone"`
	Total       int                `json:"phasesTotal"`
	CostUSD     float64            `json:"costUsd"`
	TaskStatus  mapping.TaskStatus `json:"taskStatus,omitempty"`
	SinkProblem string             `json:"sinkProblem,omitempty"`
}

func progressOf(s taskapi.Status, now time.Time) progress {
	p := progress{
		Attempt: s.Attempt, Stage: s.Stage, Plan: s.PlanName, Phase: s.CurrentPhase, PhaseStatus: s.PhaseStatus,
		Done: s.CompletedPhases, Total: s.TotalPhases, CostUSD: s.CostUSD, TaskStatus: s.TaskStatus,
		SinkProblem: s.SinkProblem,
	}
	if !s.StartedAt.IsZero() && now.After(s.StartedAt) {
		p.ElapsedMS = now.Sub(s.StartedAt).Milliseconds()
	}
	return p
}

// sameAs reports whether nothing but the clock moved.
func (p progress) sameAs(q progress) bool {
	p.ElapsedMS, q.ElapsedMS = 0, 0
	return p == q
}

// line: "00:12 [######--------------] 1/3 test running · attempt 1 · $0.85 · in_progress".
func (p progress) line(color bool) string {
	var b strings.Builder
	b.WriteString(clock(time.Duration(p.ElapsedMS) * time.Millisecond))
	b.WriteString(" " + runview.Bar(p.Done, p.Total, color))
	b.WriteString(fmt.Sprintf(" %d/%d", p.Done, p.Total))
	switch {
	case p.Phase != "":
		b.WriteString(" " + p.Phase + " " + paint(p.PhaseStatus, color))
	default:
		b.WriteString(" " + stageWords(p.Stage))
	}
	b.WriteString(fmt.Sprintf(" · attempt %d · $%.2f", p.Attempt, p.CostUSD))
	if p.TaskStatus != "" {
		b.WriteString(" · " + string(p.TaskStatus))
	}
	if p.SinkProblem != "" {
		b.WriteString(" · sink problem: " + p.SinkProblem)
	}
	return b.String()
}

// summary is how a followed task ended.
type summary struct {
	Final      bool               `json:"final"`
	TaskID     string             `json:"taskId"`
	TaskStatus mapping.TaskStatus `json:"taskStatus"`
	Attempt    int                `json:"attempt"`
	Plan       string             `json:"plan"`
	Done       int                `json:"phasesDone"`
	Total      int                `json:"phasesTotal"`
	CostUSD    float64            `json:"costUsd"`
	DurationMS int64              `json:"durationMs"`
	LastError  string             `json:"lastError,omitempty"`
}

// summaryOf sums up a result: what every attempt it records cost, and the
// time from the first attempt's start to the last one's end.
func summaryOf(res taskapi.Result, now time.Time) summary {
	s := summary{
		Final: true, TaskID: res.TaskID, TaskStatus: res.Outcome.TaskStatus, Attempt: res.Attempt,
		Plan: res.PlanName, Done: res.Brief.CompletedPhases, Total: res.Brief.Plan.TotalPhases,
		LastError: res.Outcome.LastError,
	}
	var start, end time.Time
	for _, a := range res.Attempts {
		if start.IsZero() || (!a.StartedAt.IsZero() && a.StartedAt.Before(start)) {
			start = a.StartedAt
		}
		if a.EndedAt.After(end) {
			end = a.EndedAt
		}
		if a.CostUSD != nil {
			s.CostUSD += *a.CostUSD
		}
	}
	if len(res.Attempts) == 0 {
		s.CostUSD = briefCost(res.Brief)
	}
	if end.IsZero() {
		end = now
	}
	if !start.IsZero() && end.After(start) {
		s.DurationMS = end.Sub(start).Milliseconds()
	}
	return s
}

// line: "task T5 completed in 4m15s · 3/3 phases · $1.45 · attempt 1 · plan karvi-t5-020d01".
func (s summary) line(color bool) string {
	line := fmt.Sprintf("task %s %s in %s · %d/%d phases · $%.2f · attempt %d · plan %s",
		s.TaskID, paint(string(s.TaskStatus), color), roundDuration(time.Duration(s.DurationMS)*time.Millisecond),
		s.Done, s.Total, s.CostUSD, s.Attempt, s.Plan)
	if s.LastError != "" {
		line += ": " + s.LastError
	}
	return line
}

// briefCost is what a brief says was spent: the plan's total once known,
// else the sum of its phases.
func briefCost(b mapping.Brief) float64 {
	if b.Cost.TotalUSD != nil {
		return *b.Cost.TotalUSD
	}
	var sum float64
	for _, c := range b.Cost.ByPhase {
		sum += c
	}
	return sum
}

// roundDuration keeps the digits a person reads: 850ms, 4.7s, 2m5s.
func roundDuration(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// clock is an elapsed time as mm:ss, or h:mm:ss past an hour.
func clock(d time.Duration) string {
	d = d.Truncate(time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", m, s)
}

func stageWords(s taskapi.Stage) string {
	switch s {
	case taskapi.StagePrepare:
		return "preparing the plan"
	case taskapi.StageStart:
		return "starting the conductor"
	case taskapi.StageRunning:
		return "waiting for the first phase"
	case taskapi.StageFinish:
		return "finishing"
	case taskapi.StageDone:
		return "ended"
	}
	return string(s)
}

const (
	ansiGreen  = "\x1b[32m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiReset  = "\x1b[0m"
)

// paint colours a phase or task status on a terminal.
func paint(status string, color bool) string {
	if !color || status == "" {
		return status
	}
	c := ""
	switch status {
	case mapping.PhasePassed, mapping.PhaseSkipped, string(mapping.TaskCompleted):
		c = ansiGreen
	case mapping.PhaseFailed, mapping.PhaseStale, string(mapping.TaskBlocked):
		c = ansiRed
	case mapping.PhaseRunning, mapping.PhaseChecking:
		c = ansiYellow
	default:
		return status
	}
	return c + status + ansiReset
}
