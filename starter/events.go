package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/errtext"
)

// events prints a task's canonical event stream: what the workflow did and
// every conductor event, as stored (redacted) by the workers. The stream
// is read through Temporal (the task's reader workflow, taskapi), never
// from this machine's disk. The cursor is a byte offset in the stream,
// held here: each page says where the next begins, so a worker killed
// mid-read, a workflow continued as new or a reader workflow that ended
// and was started again change nothing of what is printed, and nothing is
// printed twice.

// eventsOptions say what `starter events` prints.
type eventsOptions struct {
	// Follow keeps reading until the task's workflow has closed and its
	// stream is read to the end.
	Follow bool
	// Since is the byte offset to start from: 0, or the size of what -json
	// printed before.
	Since int64
	// JSON prints the events as stored, one JSON object per line.
	JSON bool
	// Color marks states with ANSI colours: only for a terminal.
	Color bool
	// Loc is the time zone of the times shown.
	Loc *time.Location
}

func eventsOptionsFor(w io.Writer, o eventsOpts) eventsOptions {
	return eventsOptions{Follow: o.follow, Since: o.since, JSON: o.json, Color: !o.json && isTerminal(w), Loc: time.Local}
}

// followWait is how long one read waits for the next event while
// following: long enough that a quiet task costs few reads, short enough
// that the task's end is noticed soon after.
const followWait = 5 * time.Second

// eventSource is a stream to print: a task's, or a run's.
type eventSource struct {
	what       string // "task T5", "run user-profiles"
	workflowID string // whose running means more may come
	readerID   string // the reader workflow's id
	input      taskapi.EventsInput
	// describe describes the workflow of workflowID.
	describe func(context.Context, client.Client) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

func taskEvents(taskID string) eventSource {
	return eventSource{what: "task " + taskID, workflowID: taskapi.WorkflowID(taskID),
		readerID: taskapi.EventsWorkflowID(taskID), input: taskapi.EventsInput{TaskID: taskID},
		describe: func(ctx context.Context, cl client.Client) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
			return taskapi.Tasks{Client: cl}.Describe(ctx, taskID, "")
		}}
}

func runEvents(slug string) eventSource {
	return eventSource{what: "run " + slug, workflowID: runapi.WorkflowID(slug),
		readerID: taskapi.RunEventsWorkflowID(slug), input: taskapi.EventsInput{Stream: canonical.RunIDForRun(slug)},
		describe: func(ctx context.Context, cl client.Client) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
			return runapi.Runs{Client: cl}.Describe(ctx, slug)
		}}
}

func printEvents(ctx context.Context, cl client.Client, taskQueue string, src eventSource, o eventsOptions, w io.Writer) error {
	if o.Since < 0 {
		return fmt.Errorf("-since %d: an offset is 0 or more", o.Since)
	}
	off := o.Since
	for first := true; ; first = false {
		// Whether the task is still running is asked before the read: a
		// read that began after the workflow closed and found nothing new
		// has seen the stream's end.
		running := false
		if o.Follow || first {
			var err error
			if running, err = sourceRunning(ctx, cl, src); err != nil {
				return err
			}
		}
		var wait time.Duration
		if o.Follow && running {
			wait = followWait
		}
		page, err := readPage(ctx, cl, taskQueue, src, off, wait, o.Follow)
		if err != nil {
			return err
		}
		for _, line := range page.Lines {
			if err := o.print(w, line); err != nil {
				return err
			}
		}
		off = page.Next
		if len(page.Lines) > 0 {
			continue
		}
		if !o.Follow || !running {
			return nil
		}
	}
}

// taskRunning reports whether the task's workflow (its latest run) is
// running; a task without a workflow is an error.
func sourceRunning(ctx context.Context, cl client.Client, src eventSource) (bool, error) {
	id := src.workflowID
	desc, err := src.describe(ctx, cl)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, fmt.Errorf("%s has no workflow (%s)", src.what, id)
	}
	if err != nil {
		return false, fmt.Errorf("describe %s: %w", id, err)
	}
	return desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// readRetries bounds the reads retried in a row after a failure that may
// pass (the server or the network); a worker that is down makes a read
// wait, not fail.
const readRetries = 10

// answerWithin bounds a read when not following: with no worker on the
// task queue a read would wait for ever. A follower waits instead, since
// a worker that is restarted must not end it.
const answerWithin = time.Minute

func readPage(ctx context.Context, cl client.Client, taskQueue string, src eventSource, off int64, wait time.Duration, follow bool) (taskapi.EventsPage, error) {
	if follow {
		return readEvents(ctx, cl, taskQueue, src, off, wait)
	}
	rctx, cancel := context.WithTimeout(ctx, answerWithin)
	defer cancel()
	page, err := readEvents(rctx, cl, taskQueue, src, off, wait)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return page, fmt.Errorf("read the events of %s: no worker on task queue %s answered within %s", src.what, taskQueue, answerWithin)
	}
	return page, err
}

// readEvents reads one page through the task's reader workflow, starting
// it when none runs.
func readEvents(ctx context.Context, cl client.Client, taskQueue string, src eventSource, off int64, wait time.Duration) (taskapi.EventsPage, error) {
	backoff := 200 * time.Millisecond
	for try := 1; ; try++ {
		page, err := readOnce(ctx, cl, taskQueue, src, taskapi.EventsRead{Offset: off, Wait: wait})
		if err == nil {
			return page, nil
		}
		var appErr *temporal.ApplicationError
		renewing := errors.As(err, &appErr) && appErr.Type() == taskapi.ErrReaderRenewing
		if renewing {
			// The reader lets its reads under way finish (at most
			// MaxEventsWait) and continues as new: not a failure.
			try = 0
		}
		if ctx.Err() != nil || appErr != nil && !renewing || try >= readRetries {
			// The read itself failed (a bad offset, a broken store): final.
			return taskapi.EventsPage{}, fmt.Errorf("read the events of %s from byte %d: %s", src.what, off, errtext.Root(err))
		}
		select {
		case <-ctx.Done():
			return taskapi.EventsPage{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func readOnce(ctx context.Context, cl client.Client, taskQueue string, src eventSource, req taskapi.EventsRead) (taskapi.EventsPage, error) {
	return taskapi.Tasks{Client: cl, TaskQueue: taskQueue}.ReadEvents(ctx, src.readerID, src.what, src.input, req)
}

// print writes one stored event: as is for -json, else one aligned line.
func (o eventsOptions) print(w io.Writer, line string) error {
	if o.JSON {
		_, err := io.WriteString(w, line+"\n")
		return err
	}
	_, err := io.WriteString(w, eventLine(line, o.Color, o.Loc)+"\n")
	return err
}

// Column widths of an event line.
const (
	stateWidth = 9
	typeWidth  = 12
	whoWidth   = 22
	whatRunes  = 160
)

// eventLine is one event for a person: its time, state, type, role and
// agent, and a short account of its payload and cost:
//
//	03:02:00.000  done       task_done     executor/implement      success: phase implement passed · $0.85 · 1m59s
func eventLine(line string, color bool, loc *time.Location) string {
	ev, err := canonical.Parse([]byte(line))
	if err != nil {
		return line // not ours to judge: shown as stored
	}
	at := ev.TS
	if t, err := time.Parse(time.RFC3339Nano, ev.TS); err == nil {
		if loc == nil {
			loc = time.UTC
		}
		at = t.In(loc).Format("15:04:05.000")
	}
	state := pad(string(ev.State), stateWidth)
	if color {
		state = paintState(ev.State, state)
	}
	return fmt.Sprintf("%s  %s  %s  %s  %s", at, state, pad(string(ev.Type), typeWidth),
		pad(string(ev.Role)+"/"+ev.AgentID, whoWidth), what(ev))
}

func pad(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

func paintState(s canonical.State, text string) string {
	c := ""
	switch s {
	case canonical.StateDone:
		c = ansiGreen
	case canonical.StateFailed, canonical.StateError, canonical.StateBlocked:
		c = ansiRed
	case canonical.StateRunning, canonical.StateWaiting:
		c = ansiYellow
	default:
		return text
	}
	return c + text + ansiReset
}

// what sums up an event's payload by its type, then its cost and latency.
func what(ev canonical.Event) string {
	var p map[string]any
	_ = json.Unmarshal(ev.Payload, &p)
	get := func(k string) string {
		switch v := p[k].(type) {
		case string:
			return v
		case float64:
			return fmt.Sprint(v)
		case bool:
			return fmt.Sprint(v)
		}
		return ""
	}
	join := func(a, b string) string {
		switch {
		case a == "":
			return b
		case b == "":
			return a
		}
		return a + ": " + b
	}
	var s string
	switch ev.Type {
	case canonical.TypeStateChange:
		s = get("from") + " → " + get("to")
		if t := get("trigger"); t != "" {
			s += " (" + t + ")"
		}
		s = join(s, firstOf(get("title"), get("plan_name")))
	case canonical.TypeTaskSpawn:
		s = get("title")
		if c := get("child_agent"); c != "" {
			s += " → " + c
		}
	case canonical.TypeTaskUpdate:
		s = get("message")
		if pr := get("progress"); pr != "" && pr != "0" {
			s += " (" + pr + "%)"
		}
		s = join(s, get("last_error"))
	case canonical.TypeTaskDone, canonical.TypeVerify:
		s = join(get("result"), firstOf(get("summary"), get("reason")))
	case canonical.TypeFix:
		s = join(get("target"), get("strategy"))
	case canonical.TypeError:
		s = join(get("error_type"), get("message"))
	case canonical.TypeReplan, canonical.TypeRecover:
		s = get("reason")
	case canonical.TypeToolCall:
		s = get("tool_name")
	case canonical.TypeToolResult:
		ok := "failed"
		if get("success") == "true" {
			ok = "ok"
		}
		s = join(get("tool_name")+" "+ok, get("output_preview"))
	default:
		s = get("message")
	}
	if m := ev.Metrics; m != nil {
		if m.CostUSD != nil {
			s += fmt.Sprintf(" · $%.2f", *m.CostUSD)
		}
		if m.LatencyMS != nil {
			s += " · " + roundDuration(time.Duration(*m.LatencyMS*float64(time.Millisecond)))
		}
	}
	return cutRunes(strings.Join(strings.Fields(s), " "), whatRunes)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
