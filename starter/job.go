package main

import (
	"context"
	"flag"
	"io"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/jobview"
)

type jobOpts struct{ report bool }

func (o *jobOpts) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.report, "report", false, "a summary for a person instead of JSON: the verdict, then each attempt and each step's time and cost")
}

// printJob prints the task as a job (the job query): JSON in snake_case,
// as a job tool's --json prints it, or the report a person reads.
func printJob(ctx context.Context, cl client.Client, taskID string, report bool, stdout io.Writer) error {
	var j jobview.Job
	if err := query(ctx, cl, taskID, taskapi.QueryJob, &j); err != nil {
		return err
	}
	return writeJob(stdout, j, report)
}

func writeJob(w io.Writer, j jobview.Job, report bool) error {
	if report {
		_, err := io.WriteString(w, jobview.Report(j))
		return err
	}
	return printJSON(w, j)
}
