package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/intake"
)

type intakeOpts struct {
	board string
	json  bool
}

func (o *intakeOpts) flags(fs *flag.FlagSet) {
	def := os.Getenv("KARVI_URL")
	if def == "" {
		def = "http://localhost:3461"
	}
	fs.StringVar(&o.board, "board", def, "karvi base `URL` of the board the intake follows, as the worker's -karvi-url (env KARVI_URL)")
	fs.BoolVar(&o.json, "json", false, "the intake's whole status as JSON")
}

// showIntake queries the intake workflow of a board.
func showIntake(ctx context.Context, cl client.Client, board string, asJSON bool, stdout io.Writer) error {
	id := intakeapi.WorkflowID(board)
	st, err := intakeapi.Intakes{Client: cl}.Status(ctx, board)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return fmt.Errorf("no karvi intake for %s (workflow %s): start a worker with -intake-karvi -karvi-url %s", board, id, board)
		}
		return fmt.Errorf("query the intake %s: %w", id, err)
	}
	if asJSON {
		return printJSON(stdout, st)
	}
	return printIntake(stdout, id, st)
}

// printIntake writes the status for a person: what is followed, the
// problem if any, the claims, the runs, what was skipped and why, and the
// last actions.
func printIntake(w io.Writer, id string, st intakeapi.Status) error {
	fmt.Fprintf(w, "intake %s\n", id)
	fmt.Fprintf(w, "  follows  %s (runtimeHint %q), tasks run on queue %s\n", st.BoardURL, st.RuntimeHint, st.TaskQueue)
	fmt.Fprintf(w, "  board    _version %d, %d reads acted on, %d ticks, continued-as-new %d times\n",
		st.Version, st.Counts.BoardsRead, st.Counts.Ticks, st.Counts.Continued)
	if st.Problem != "" {
		fmt.Fprintf(w, "  PROBLEM  %s\n", st.Problem)
	}
	fmt.Fprintf(w, "  totals   started %d, redispatched %d, aborted %d, blocked %d, failed %d, ends seen %d\n",
		st.Counts.Started, st.Counts.Redispatch, st.Counts.Aborted, st.Counts.Blocked, st.Counts.Failed, st.Counts.EndsSeen)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	if len(st.Claims) > 0 {
		fmt.Fprintln(w, "claimed:")
		fmt.Fprintln(tw, "  TASK\tPHASE\tATTEMPT\tFINAL\tWORKFLOW\tNOTE")
		for _, c := range st.Claims {
			wf := c.RunWorkflowID
			if wf == "" {
				wf = "karvi-task-" + c.TaskID
			}
			note := c.Reason
			if c.Aborted {
				note = strings.TrimSpace("abort asked " + note)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\n", c.TaskID, c.Phase, c.Attempt, dash(c.Final), wf, note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(w, "claimed: nothing on the board")
	}
	if len(st.Runs) > 0 {
		fmt.Fprintln(w, "runs:")
		for _, r := range st.Runs {
			switch {
			case r.Refused != "":
				fmt.Fprintf(w, "  project %s refused: %s\n", r.ProjectID, r.Refused)
			case r.Paused:
				fmt.Fprintf(w, "  project %s -> %s (paused), tasks %s\n", r.ProjectID, r.WorkflowID, strings.Join(r.Tasks, ", "))
			default:
				fmt.Fprintf(w, "  project %s -> %s, tasks %s\n", r.ProjectID, r.WorkflowID, strings.Join(r.Tasks, ", "))
			}
		}
	}
	if len(st.Skipped) > 0 {
		fmt.Fprintln(w, "skipped:")
		for _, n := range st.Skipped {
			fmt.Fprintf(w, "  %s: %s\n", subject(n), n.Reason)
		}
	}
	if len(st.Recent) > 0 {
		fmt.Fprintln(w, "recent:")
		for _, n := range st.Recent {
			fmt.Fprintf(w, "  %s %s %s: %s\n", n.At.UTC().Format("15:04:05"), n.Kind, subject(n), n.Result)
		}
	}
	return nil
}

func subject(n intakeapi.Note) string {
	switch {
	case n.TaskID != "":
		return "task " + n.TaskID
	case n.ProjectID != "":
		return "project " + n.ProjectID
	}
	return "board"
}
