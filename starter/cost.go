package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
)

// budgetOf reads -budget and -budget-action; nil without a budget.
func budgetOf(o budgetOpts) (*costs.Budget, error) {
	if o.usd == 0 {
		return nil, nil
	}
	b := &costs.Budget{LimitUSD: o.usd, Action: costs.Action(o.action)}
	if err := b.Validate(); err != nil {
		return nil, &usageError{msg: err.Error()}
	}
	return b, nil
}

// runBudgetRequest reads the flags of `run budget set`.
func runBudgetRequest(o budgetChangeOpts) (runapi.BudgetRequest, error) {
	b := costs.Budget{LimitUSD: o.usd, Action: costs.Action(o.action)}
	if b.Action == "" {
		b.Action = costs.Warn // only to check the amount
	}
	if err := b.Validate(); err != nil {
		return runapi.BudgetRequest{}, &usageError{msg: err.Error()}
	}
	return runapi.BudgetRequest{LimitUSD: o.usd, Action: costs.Action(o.action)}, nil
}

// runBudgetSetCmd sets a run's budget, checked here first.
func runBudgetSetCmd(e *env, o *budgetChangeOpts) error {
	req, err := runBudgetRequest(*o)
	if err != nil {
		return err
	}
	cl, err := e.client()
	if err != nil {
		return err
	}
	return updateRun(e.ctx, cl, e.inv.arg, runapi.UpdateBudget, req, e.stdout)
}

// printTaskOrRunCost prints a task's spending, or a run's when no task has
// that id and a run has that slug.
func printTaskOrRunCost(ctx context.Context, cl client.Client, id string, asJSON bool, stdout io.Writer) error {
	var c taskapi.Cost
	err := taskapi.Tasks{Client: cl}.Query(ctx, id, "", taskapi.QueryCost, &c)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		if _, derr := (runapi.Runs{Client: cl}).Describe(ctx, id); derr == nil {
			return printRunCost(ctx, cl, id, asJSON, stdout)
		}
		return fmt.Errorf("%s is neither a task (no workflow %s) nor a run (no workflow %s)", id, taskapi.WorkflowID(id), runapi.WorkflowID(id))
	}
	if err != nil {
		return fmt.Errorf("task %s: query cost: %w", id, err)
	}
	return printCost(stdout, "task "+id, c.Summary, 0, c.Budget, c.Level, asJSON, c)
}

func printRunCost(ctx context.Context, cl client.Client, slug string, asJSON bool, stdout io.Writer) error {
	var c runapi.Cost
	if err := (runapi.Runs{Client: cl}).Query(ctx, slug, runapi.QueryCost, &c); err != nil {
		return runError(slug, "query cost of", err)
	}
	return printCost(stdout, "run "+slug, c.Summary, c.RunningUSD, c.Budget, c.Level, asJSON, c)
}

// printCost prints spending as tables a person reads: the total and the
// budget, then by phase, task, model and skill, largest first.
func printCost(w io.Writer, what string, s costs.Summary, running float64, b *costs.Budget, level string, asJSON bool, raw any) error {
	if asJSON {
		return printJSON(w, raw)
	}
	var out strings.Builder
	total := s.TotalUSD + running
	fmt.Fprintf(&out, "%s spent $%.2f", what, total)
	if running > 0 {
		fmt.Fprintf(&out, " ($%.2f by attempts still running)", running)
	}
	if b != nil {
		fmt.Fprintf(&out, " of a $%.2f budget (%s at 100 %%): %s", b.LimitUSD, b.Action, level)
	}
	out.WriteString("\n")
	for _, part := range []struct {
		name string
		m    map[string]float64
	}{{"PHASE", s.ByPhase}, {"TASK", s.ByTask}, {"MODEL", s.ByModel}, {"SKILL", s.BySkill}} {
		if len(part.m) == 0 {
			continue
		}
		out.WriteString("\n")
		tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\tUSD\tSHARE\t\n", part.name)
		keys := slices.Sorted(maps.Keys(part.m))
		slices.SortStableFunc(keys, func(a, b string) int {
			switch {
			case part.m[a] > part.m[b]:
				return -1
			case part.m[a] < part.m[b]:
				return 1
			}
			return 0
		})
		for _, k := range keys {
			share := 0.0
			if s.TotalUSD > 0 {
				share = 100 * part.m[k] / s.TotalUSD
			}
			fmt.Fprintf(tw, "%s\t$%.2f\t%.0f%%\t\n", k, part.m[k], share)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	out.WriteString("\ntokens: not reported by the conductor\n")
	_, err := io.WriteString(w, out.String())
	return err
}
