package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/temporalconn"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/internal/tracing"
	"karvi-edda-temporal/mapping"
)

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// cli runs the starter and says how it ended: 0 done (or help shown), 1 the
// command failed, 2 the command line was wrong. The usage is printed once:
// to stdout when asked for, to stderr after a mistake on the command line.
func cli(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdin, stdout)
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "starter: %s\n\n", ue.msg)
		printUsage(stderr, ue.cmd)
		return 2
	default:
		fmt.Fprintln(stderr, "starter:", err)
		return 1
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	inv, err := parseArgs(args)
	var help *helpRequest
	if errors.As(err, &help) {
		printUsage(stdout, help.cmd)
		return nil
	}
	if err != nil {
		return err
	}
	if err := checkFlags(inv); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{ctx: ctx, inv: inv, stdin: stdin, stdout: stdout}
	defer e.close()
	return inv.run(e)
}

// env is what a command's handler works with: its parsed command line, its
// input and output, and a Temporal client dialled on first use (commands
// that need no server never dial).
type env struct {
	ctx    context.Context
	inv    invocation
	stdin  io.Reader
	stdout io.Writer
	cl     client.Client
	queue  string
	// conn is the connection cl was dialled with.
	conn temporalconn.Config
	// tracing is on when the OTEL_* environment asks (nil otherwise).
	tracing *tracing.Tracing
}

// client dials Temporal as the connection flags say, once.
func (e *env) client() (client.Client, error) {
	if e.cl != nil {
		return e.cl, nil
	}
	conn, err := temporalconn.Load(e.inv.conn)
	if err != nil {
		return nil, err
	}
	// A start begins its task's or run's trace (docs/traces.md).
	if e.tracing, err = tracing.Setup(e.ctx, &conn.Options); err != nil {
		return nil, err
	}
	cl, err := conn.Dial(e.ctx, temporalconn.ErrorLogger(os.Stderr))
	if err != nil {
		return nil, err
	}
	e.cl, e.queue, e.conn = cl, conn.TaskQueue, conn
	return cl, nil
}

func (e *env) close() {
	if e.cl != nil {
		e.cl.Close()
	}
	if e.tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.tracing.Shutdown(ctx) // the start's span: best effort, the start itself succeeded
	}
}

func readDispatch(arg string, stdin io.Reader) (mapping.DispatchPlan, error) {
	var data []byte
	var err error
	if arg == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, 16<<20))
	} else {
		data, err = os.ReadFile(arg)
	}
	if err != nil {
		return mapping.DispatchPlan{}, fmt.Errorf("read dispatch plan: %w", err)
	}
	d, err := mapping.ParseDispatchPlan(data)
	if err != nil {
		return mapping.DispatchPlan{}, err
	}
	return d, nil
}

func printPlan(arg string, stdin io.Reader, stdout io.Writer, templatesDir string, attempt int) error {
	d, err := readDispatch(arg, stdin)
	if err != nil {
		return err
	}
	ts, err := templateSet(templatesDir)
	if err != nil {
		return err
	}
	t, err := ts.Select(d)
	if err != nil {
		return err
	}
	p, err := mapping.BuildPlan(d, attempt, t)
	if err != nil {
		return err
	}
	data, err := mapping.MarshalPlan(p)
	if err != nil {
		return err
	}
	_, err = stdout.Write(data)
	return err
}

// getenv reads the starter's environment (tests replace it).
var getenv = os.Getenv

// timeScale is the time scale of the workflows the starter starts:
// KARVI_EDDA_TIME_SCALE, as the worker's -time-scale reads it, so that one
// environment scales a whole test deployment (internal/timescale).
func timeScale() (timescale.Scale, error) {
	s, err := timescale.Parse(getenv(timescale.Env))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", timescale.Env, err)
	}
	return s, nil
}

// start starts a task's workflow. A task whose workflow runs is refused:
// a second start never re-attaches to it (redispatch or abort it). A task
// whose last workflow ended gets a new workflow and so a new attempt,
// numbered after the last one when its result says which that was, and
// named with the new workflow's nonce: it never re-attaches to the
// earlier attempt's conductor. The output says which of these it did.
func start(ctx context.Context, cl client.Client, taskQueue string, in taskapi.TaskInput, stdout io.Writer) error {
	scale, err := timeScale()
	if err != nil {
		return err
	}
	in.Tuning = taskapi.WithScale(in.Tuning, scale)
	tasks := taskapi.Tasks{Client: cl, TaskQueue: taskQueue}
	id := taskapi.WorkflowID(in.Dispatch.TaskID)
	if prev, ok := tasks.Last(ctx, in.Dispatch.TaskID); ok {
		if prev.Running {
			return fmt.Errorf("refused: task %s already has a running workflow %s (run %s, attempt %d): "+
				"a start never re-attaches to it; redispatch it for a new attempt, or abort it",
				in.Dispatch.TaskID, id, prev.RunID, prev.Attempt)
		}
		if prev.Attempt > 0 {
			in.Attempt = max(in.Attempt, prev.Attempt+1)
		}
		fmt.Fprintf(stdout, "task %s ran before (workflow %s run %s ended %s%s): starting a new attempt\n",
			in.Dispatch.TaskID, id, prev.RunID, prev.Status, attemptWords(prev))
	}
	run, err := tasks.Start(ctx, in, taskapi.StartOptions{})
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return fmt.Errorf("task %s already has a running workflow %s (run %s): abort or redispatch it instead",
				in.Dispatch.TaskID, id, started.RunId)
		}
		return fmt.Errorf("start workflow %s: %w", id, err)
	}
	n := max(in.Attempt, 1)
	plan := mapping.AttemptPlanName(in.Dispatch.TaskID, n, mapping.AttemptNonce(id, run.GetRunID()))
	fmt.Fprintf(stdout, "started %s run %s (attempt %d, plan %s)\n", id, run.GetRunID(), n, plan)
	return nil
}

func attemptWords(p taskapi.Previous) string {
	if p.Attempt > 0 {
		return fmt.Sprintf(" on attempt %d", p.Attempt)
	}
	return ""
}

func signalTask(ctx context.Context, cl client.Client, taskID, name string, payload any, stdout io.Writer) error {
	id := taskapi.WorkflowID(taskID)
	if err := (taskapi.Tasks{Client: cl}).Signal(ctx, taskID, "", name, payload); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return fmt.Errorf("task %s has no running workflow (%s): nothing to %s", taskID, id, name)
		}
		return fmt.Errorf("signal %s to %s: %w", name, id, err)
	}
	fmt.Fprintf(stdout, "sent %s to %s\n", name, id)
	return nil
}

// redispatch signals a running workflow; for a task whose workflow already
// closed it starts a new one at the next attempt, with the same dispatch
// (waiting for a slot of the pool given, if any: a running workflow keeps
// its own).
func redispatch(ctx context.Context, cl client.Client, taskQueue, taskID, reason string, slots *taskapi.SlotRequest, stdout io.Writer) error {
	tasks := taskapi.Tasks{Client: cl, TaskQueue: taskQueue}
	id := taskapi.WorkflowID(taskID)
	running, err := tasks.Running(ctx, taskID)
	if err != nil {
		return fmt.Errorf("task %s: no workflow %s to redispatch: %w", taskID, id, err)
	}
	if running {
		return signalTask(ctx, cl, taskID, taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: reason}, stdout)
	}
	prev, err := tasks.Result(ctx, taskID, "")
	if err != nil {
		return fmt.Errorf("task %s: the last workflow did not end with a result to redispatch from: %w", taskID, err)
	}
	return start(ctx, cl, taskQueue, taskapi.TaskInput{Dispatch: prev.Dispatch, Attempt: prev.Attempt + 1, Slots: slots}, stdout)
}

func query(ctx context.Context, cl client.Client, taskID, name string, out any) error {
	if err := (taskapi.Tasks{Client: cl}).Query(ctx, taskID, "", name, out); err != nil {
		return fmt.Errorf("query %s of task %s: %w", name, taskID, err)
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
