package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/errtext"
	"karvi-edda-temporal/slots"
)

// The slot flags are checked once parsed (check), so that flags that
// cannot work are refused before anything reaches Temporal.

// taskPoolOpts: a task that waits for an agent slot.
type taskPoolOpts struct {
	pool        string
	slotTimeout time.Duration
}

func (o *taskPoolOpts) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.pool, "pool", "", "agent slot `pool` the task's conductor waits for (none: it starts at once; a running workflow keeps its own)")
	fs.DurationVar(&o.slotTimeout, "slot-timeout", 0, "with -pool: how long to wait in line before the attempt ends blocked (0: as long as it takes)")
}

func (o *taskPoolOpts) check() error {
	if o.pool == "" {
		if o.slotTimeout != 0 {
			return errors.New("-slot-timeout needs -pool")
		}
		return nil
	}
	if err := checkPool(o.pool); err != nil {
		return err
	}
	if o.slotTimeout < 0 {
		return fmt.Errorf("-slot-timeout %s must not be negative", o.slotTimeout)
	}
	return nil
}

func checkPool(pool string) error {
	if err := slots.ValidPoolName(pool); err != nil {
		return errors.New("-pool: " + err.Error())
	}
	return nil
}

// slotsOpts: the pool to show, none for every pool.
type slotsOpts struct {
	pool string
	json bool
}

func (o *slotsOpts) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.pool, "pool", "", "agent slot `pool` to show (default: list every pool that runs)")
	fs.BoolVar(&o.json, "json", false, "the pool's view as JSON")
}

func (o *slotsOpts) check() error {
	if o.pool == "" {
		return nil // every pool
	}
	return checkPool(o.pool)
}

// slotsSetOpts: a pool's new limits (maxTotal nil: keep the pool's).
type slotsSetOpts struct {
	pool          string
	maxConcurrent int
	maxTotal      *int
	checkEvery    time.Duration
}

func (o *slotsSetOpts) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.pool, "pool", taskapi.DefaultSlotPool, "agent slot `pool`")
	fs.IntVar(&o.maxConcurrent, "max-concurrent", 0, "how many conductors may run at once (required, 1 to 10000)")
	fs.Func("max-total", "how many slots one run may be granted in all, `n` (0: no limit; default: keep the pool's)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not a number: %q", v)
		}
		o.maxTotal = &n
		return nil
	})
	fs.DurationVar(&o.checkEvery, "check-every", 0, "how often the pool looks whether its holders' workflows still run (default: keep the pool's)")
}

func (o *slotsSetOpts) check() error {
	if err := checkPool(o.pool); err != nil {
		return err
	}
	if o.maxConcurrent == 0 {
		return errors.New("-max-concurrent is required")
	}
	if err := setRequest(*o).Validate(); err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// slotRequest is a started task's slot request, nil without -pool.
func slotRequest(o taskPoolOpts) *taskapi.SlotRequest {
	if o.pool == "" {
		return nil
	}
	return &taskapi.SlotRequest{Pool: o.pool, Timeout: o.slotTimeout}
}

func setRequest(o slotsSetOpts) slotapi.SetRequest {
	return slotapi.SetRequest{MaxConcurrent: o.maxConcurrent, MaxTotal: o.maxTotal, CheckEvery: o.checkEvery}
}

// showSlots prints a pool's limits, holders and waiters.
func showSlots(ctx context.Context, cl client.Client, pool string, asJSON bool, stdout io.Writer) error {
	if pool == "" {
		return listPools(ctx, cl, asJSON, stdout)
	}
	view, err := queryPool(ctx, cl, pool)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return fmt.Errorf("pool %s has no workflow (%s): no task asked it for a slot yet, and `starter slots set -pool %s` was never run", pool, slotapi.WorkflowID(pool), pool)
		}
		return fmt.Errorf("query pool %s: %w", pool, err)
	}
	if asJSON {
		return printJSON(stdout, view)
	}
	printSlots(stdout, view)
	return nil
}

// setSlots changes a pool's limits, starting the pool with them when it
// does not run yet, and prints the pool as it then stands.
func setSlots(ctx context.Context, cl client.Client, taskQueue, pool string, req slotapi.SetRequest, stdout io.Writer) error {
	scale, err := timeScale()
	if err != nil {
		return err
	}
	in := slotapi.PoolInput{Pool: pool, CheckEvery: req.CheckEvery}
	if scale.Scaled() {
		in.TimeScale = float64(scale)
	}
	limits := slots.Limits{MaxConcurrent: req.MaxConcurrent}
	if req.MaxTotal != nil {
		limits.MaxTotal = *req.MaxTotal
	}
	in.Limits = &limits
	view, err := slotapi.Pools{Client: cl, TaskQueue: taskQueue}.Set(ctx, in, req)
	if err != nil {
		return fmt.Errorf("pool %s: set: %w", pool, err)
	}
	fmt.Fprintf(stdout, "pool %s: %s\n", pool, limitsLine(view))
	return nil
}

func limitsLine(v slotapi.View) string {
	total := "no max_total"
	if v.Limits.MaxTotal > 0 {
		total = fmt.Sprintf("max_total %d per run", v.Limits.MaxTotal)
	}
	return fmt.Sprintf("max_concurrent %d, %s, holders checked every %s; %d held, %d waiting",
		v.Limits.MaxConcurrent, total, v.CheckEvery, len(v.Holders), len(v.Waiters))
}

// printSlots draws a pool for a person: its limits, then its holders in
// grant order and its waiters in line order, with how long each has been
// there as of the pool's answer.
func printSlots(w io.Writer, v slotapi.View) {
	now := v.UpdatedAt
	fmt.Fprintf(w, "pool %s: %s\n", v.Pool, limitsLine(v))
	s := v.Stats
	line := fmt.Sprintf("granted %d, released %d", s.Granted, s.Released)
	if v.Dropped > 0 {
		line += fmt.Sprintf(" (%d taken back from a closed workflow)", v.Dropped)
	}
	if s.Expired > 0 {
		line += fmt.Sprintf(", %d lease expired", s.Expired)
	}
	var refused []string
	for _, r := range []slots.Reason{slots.ReasonMaxConcurrent, slots.ReasonMaxTotal, slots.ReasonTimeout} {
		if n := s.Refused[r]; n > 0 {
			refused = append(refused, fmt.Sprintf("%s %d", r, n))
		}
	}
	if len(refused) > 0 {
		line += ", refused: " + strings.Join(refused, ", ")
	}
	if s.Cancelled > 0 {
		line += fmt.Sprintf(", %d stopped waiting", s.Cancelled)
	}
	fmt.Fprintln(w, line)

	fmt.Fprintln(w)
	if len(v.Holders) == 0 {
		fmt.Fprintln(w, "no slot held")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HOLDER\tATTEMPT\tRUN\tSINCE")
		for _, h := range v.Holders {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", h.Task, h.Attempt, dash(h.Run), since(h.Since, now))
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(v.Waiters) == 0 {
		fmt.Fprintln(w, "nobody waiting")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINE\tTASK\tATTEMPT\tRUN\tWAITING SINCE\tTIMEOUT")
	for _, x := range v.Waiters {
		timeout := "none"
		if x.Timeout > 0 {
			timeout = fmt.Sprintf("%s (%s left)", x.Timeout, x.Deadline.Sub(now).Round(time.Second))
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", x.Position, x.Task, x.Attempt, dash(x.Run), since(x.Since, now), timeout)
	}
	tw.Flush()
}

func since(t, now time.Time) string {
	return fmt.Sprintf("%s (%s)", t.UTC().Format("15:04:05"), now.Sub(t).Round(time.Second))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// poolAnswerWait bounds each pool's query when listing: a pool whose task
// queue has no worker polling it never answers, and must not hold up (or
// hide) the pools that do.
const poolAnswerWait = 5 * time.Second

// listedPool is one running pool's workflow and, once asked, its view or
// why it gave none.
type listedPool struct {
	name, queue string
	view        slotapi.View
	err         error
}

// listPools shows every pool that runs, one line each (-json: the views of
// the pools that answered). The pools are asked at once, each for at most
// poolAnswerWait; a pool that does not answer is listed as such.
func listPools(ctx context.Context, cl client.Client, asJSON bool, stdout io.Writer) error {
	pools, err := runningPools(ctx, cl)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for i := range pools {
		wg.Add(1)
		go func(p *listedPool) {
			defer wg.Done()
			qctx, cancel := context.WithTimeout(ctx, poolAnswerWait)
			defer cancel()
			p.view, p.err = queryPool(qctx, cl, p.name)
			var late *serviceerror.DeadlineExceeded
			if errors.As(p.err, &late) || (p.err != nil && qctx.Err() != nil) {
				p.err = context.DeadlineExceeded // the server gave up waiting for a worker
			}
		}(&pools[i])
	}
	wg.Wait()
	if asJSON {
		views := []slotapi.View{}
		for _, p := range pools {
			if p.err == nil {
				views = append(views, p.view)
			}
		}
		return printJSON(stdout, views)
	}
	if len(pools) == 0 {
		fmt.Fprintln(stdout, "no slot pool runs: a task that names one starts it, or `starter slots set -pool NAME -max-concurrent N`")
		return nil
	}
	for _, p := range pools {
		switch {
		case p.err == nil:
			fmt.Fprintf(stdout, "pool %s: %s\n", p.view.Pool, limitsLine(p.view))
		case errors.Is(p.err, context.DeadlineExceeded):
			fmt.Fprintf(stdout, "pool %s: no answer: is a worker polling task queue %s?\n", p.name, p.queue)
		default:
			fmt.Fprintf(stdout, "pool %s: no answer: %s\n", p.name, errtext.Root(p.err))
		}
	}
	fmt.Fprintln(stdout, "\n`starter slots -pool NAME` shows a pool's holders and line.")
	return nil
}

// runningPools lists the pool workflows that run, sorted by pool name.
func runningPools(ctx context.Context, cl client.Client) ([]listedPool, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", slotapi.PoolWorkflowName)
	var pools []listedPool
	var next []byte
	for {
		page, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: next})
		if err != nil {
			return nil, fmt.Errorf("list the slot pools: %w", err)
		}
		for _, ex := range page.GetExecutions() {
			if name, ok := strings.CutPrefix(ex.GetExecution().GetWorkflowId(), slotapi.WorkflowID("")); ok {
				pools = append(pools, listedPool{name: name, queue: ex.GetTaskQueue()})
			}
		}
		if next = page.GetNextPageToken(); len(next) == 0 {
			break
		}
	}
	slices.SortFunc(pools, func(a, b listedPool) int { return strings.Compare(a.name, b.name) })
	return pools, nil
}

func queryPool(ctx context.Context, cl client.Client, pool string) (slotapi.View, error) {
	return slotapi.Pools{Client: cl}.View(ctx, pool)
}
