package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/runview"
)

// `run status` shows where a run stands, as the run workflow's view query
// answers it: once, or (-follow) redrawn as the run moves until it ends.
// -json prints the run's status.json document instead, exactly as the
// workflow holds it.

// runPoll is how often -follow asks the run workflow again. A run moves at
// the pace of its tasks; a second also keeps a terminal's clock moving.
const runPoll = time.Second

// clearScreen moves the cursor home and clears a terminal.
const clearScreen = "\x1b[H\x1b[2J"

type runStatusOpts struct{ follow, json bool }

func (o *runStatusOpts) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.follow, "follow", false, "redraw as the run changes until it ends")
	fs.BoolVar(&o.json, "json", false, "print the run's status.json document instead of the view")
}

// errNoRun: no workflow carries the run named.
var errNoRun = errors.New("no such run")

// runQuerier is what `run status` asks of Temporal; behind it, tests need
// no server.
type runQuerier interface {
	// query asks the run's workflow the named query, with args, and
	// decodes the answer into out. A run with no workflow is errNoRun.
	query(ctx context.Context, slug, name string, out any, args ...any) error
	// closed reports whether the run's workflow has closed, and how it
	// closed (completed, terminated, ...).
	closed(ctx context.Context, slug string) (bool, string, error)
}

// temporalRuns asks a Temporal cluster. A closed workflow still answers
// queries: a worker replays it.
type temporalRuns struct{ cl client.Client }

func (r temporalRuns) query(ctx context.Context, slug, name string, out any, args ...any) error {
	if err := (runapi.Runs{Client: r.cl}).Query(ctx, slug, name, out, args...); err != nil {
		return runError(slug, "query "+name, err)
	}
	return nil
}

func (r temporalRuns) closed(ctx context.Context, slug string) (bool, string, error) {
	desc, err := runapi.Runs{Client: r.cl}.Describe(ctx, slug)
	if err != nil {
		return false, "", runError(slug, "describe", err)
	}
	st := desc.GetWorkflowExecutionInfo().GetStatus()
	if st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false, "", nil
	}
	return true, strings.ToLower(strings.ReplaceAll(st.String(), "_", " ")), nil
}

// runError names the run and its workflow; a workflow that does not exist
// becomes errNoRun.
func runError(slug, op string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("run %s: %w: no workflow %s", slug, errNoRun, runapi.WorkflowID(slug))
	}
	return fmt.Errorf("run %s: %s %s: %w", slug, op, runapi.WorkflowID(slug), err)
}

// runStatusOptions say what `run status` prints and how.
type runStatusOptions struct {
	// JSON prints the status.json document instead of the view.
	JSON bool
	// Follow prints again whenever the run changes, until it ends.
	Follow bool
	// Terminal: colours, and -follow redraws in place on a cleared screen
	// (every poll, so durations move) instead of printing each new state
	// below the last.
	Terminal bool
	// Now is the clock the view is drawn at; Location its time zone.
	Now      func() time.Time
	Location *time.Location
	// Poll is how often -follow asks again.
	Poll time.Duration
}

func runStatusOptionsFor(w io.Writer, o runStatusOpts) runStatusOptions {
	return runStatusOptions{
		JSON: o.json, Follow: o.follow, Terminal: isTerminal(w),
		Now: time.Now, Location: time.Local, Poll: runPoll,
	}
}

// runState is one answer of the run workflow, ready to print.
type runState struct {
	text []byte
	// key is the answer as the workflow gave it: a change of key is a
	// change of the run, where the text also changes as the clock moves.
	key   []byte
	ended bool
}

// runStatus prints where the run stands. With Follow it prints again
// whenever the run changes and returns once the run has ended, complete
// or partial (nil: the run's outcome is in what was printed, as a
// followed task's is), or with an error when the workflow closed without
// ending the run.
func runStatus(ctx context.Context, runs runQuerier, slug string, stdout io.Writer, o runStatusOptions) error {
	if !o.Follow {
		st, err := fetchRun(ctx, runs, slug, o)
		if err != nil {
			return err
		}
		_, err = stdout.Write(st.text)
		return err
	}
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	var last []byte
	printed := false
	for {
		closed, how, err := runs.closed(ctx, slug)
		if err != nil {
			return err
		}
		st, err := fetchRun(ctx, runs, slug, o)
		switch {
		case err != nil && (closed || errors.Is(err, errNoRun)):
			return err
		case err != nil:
			// The workflow may be between runs (continue-as-new) or wait
			// for a worker: ask again at the next poll.
		case o.Terminal && !o.JSON:
			if _, err := io.WriteString(stdout, clearScreen+string(st.text)); err != nil {
				return err
			}
		case !bytes.Equal(st.key, last):
			if printed && !o.JSON {
				fmt.Fprintf(stdout, "\n--- %s\n\n", o.Now().In(o.location()).Format(time.TimeOnly))
			}
			if _, err := stdout.Write(st.text); err != nil {
				return err
			}
			last, printed = st.key, true
		}
		if err == nil && st.ended {
			return nil
		}
		if closed {
			return fmt.Errorf("run %s: its workflow %s is %s, but the run has not ended", slug, runapi.WorkflowID(slug), how)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// fetchRun asks for the view and draws it, or for the status.json document
// and indents it.
func fetchRun(ctx context.Context, runs runQuerier, slug string, o runStatusOptions) (runState, error) {
	// The view comes a page at a time: a large run's whole view, or its
	// status.json document, does not fit in one answer.
	v, err := runapi.FetchView(func(p runapi.ViewPage) (runapi.View, error) {
		var v runapi.View
		err := runs.query(ctx, slug, runapi.QueryView, &v, p)
		return v, err
	})
	if err != nil {
		return runState{}, err
	}
	if o.JSON {
		doc, err := json.MarshalIndent(v.Status, "", "  ")
		if err != nil {
			return runState{}, fmt.Errorf("run %s: status document: %w", slug, err)
		}
		doc = append(doc, '\n')
		return runState{text: doc, key: doc, ended: runEnded(v.Status.Status)}, nil
	}
	text := runview.Render(v, runview.Options{Now: o.Now(), Location: o.location(), Color: o.Terminal})
	// When the view was made is not a change of the run.
	stamp := v
	stamp.UpdatedAt = time.Time{}
	key, err := json.Marshal(stamp)
	if err != nil {
		return runState{}, fmt.Errorf("run %s: view: %w", slug, err)
	}
	return runState{text: []byte(text), key: key, ended: runEnded(v.Status.Status)}, nil
}

func (o runStatusOptions) location() *time.Location {
	if o.Location == nil {
		return time.UTC
	}
	return o.Location
}

func runEnded(s runstatus.RunState) bool {
	return s == runstatus.RunComplete || s == runstatus.RunPartial
}
