package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runplan"
)

// printRunPlan is the dry run of a run file: what the run would do, checked
// as far as it can be without Temporal. Every task's plan is built, so a
// skill no template is named for fails here, naming the task.
func printRunPlan(arg string, stdin io.Reader, stdout io.Writer, templatesDir string) error {
	data, err := readInput(arg, stdin)
	if err != nil {
		return fmt.Errorf("read run file: %w", err)
	}
	r, err := runplan.Parse(data)
	if err != nil {
		return err
	}
	ts, err := templateSet(templatesDir)
	if err != nil {
		return err
	}
	order := r.Order()

	// Build everything before printing, so a failure prints nothing.
	type row struct{ id, model, depends, plan, phases string }
	var rows []row
	for _, level := range order {
		for _, id := range level {
			d := r.Dispatch(id, nil)
			t, err := ts.Select(d)
			if err != nil {
				return fmt.Errorf("task %s: %w", id, err)
			}
			p, err := mapping.BuildPlan(d, 1, t)
			if err != nil {
				return fmt.Errorf("task %s: %w", id, err)
			}
			task, _ := r.Task(id)
			rows = append(rows, row{
				id:      id,
				model:   r.Model(id),
				depends: orDash(strings.Join(task.Depends, ",")),
				plan:    p.Name + " (" + t.Name + ")",
				phases:  strings.Join(p.Summary().PhaseIDs, ","),
			})
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "run %s: %s\n", r.Slug, r.Title)
	fmt.Fprintf(&b, "workflow %s, concurrency %d, %d tasks in %d levels\n\n", r.WorkflowID(), r.Concurrency, len(r.Tasks), len(order))
	b.WriteString("start order:\n")
	for i, level := range order {
		fmt.Fprintf(&b, "  %d: %s\n", i+1, strings.Join(level, " "))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tMODEL\tDEPENDS ON\tPLAN (TEMPLATE)\tPHASES")
	for _, rw := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", rw.id, rw.model, rw.depends, rw.plan, rw.phases)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}

// readInput reads a file, or stdin for "-".
func readInput(arg string, stdin io.Reader) ([]byte, error) {
	if arg == "-" {
		return io.ReadAll(io.LimitReader(stdin, 16<<20))
	}
	return os.ReadFile(arg)
}

// templateSet loads the operator templates from dir, or the built-in
// default when dir is empty.
func templateSet(dir string) (mapping.TemplateSet, error) {
	var fsys fs.FS
	if dir != "" {
		fsys = os.DirFS(dir)
	}
	ts, err := mapping.LoadTemplates(fsys)
	if err != nil {
		return mapping.TemplateSet{}, fmt.Errorf("templates %s: %w", dir, err)
	}
	return ts, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
