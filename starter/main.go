package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/internal/codec"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows"
)

const usage = `starter: start and operate karvi task workflows

  starter plan [-templates DIR] [-attempt N] <dispatch.json|->   print the plan.yaml a dispatch produces (no Temporal needed)
  starter start [-follow] <dispatch.json|->                       start the task's workflow
  starter abort [-reason R] <taskId>                              abort the task (signal abort)
  starter redispatch [-follow] <taskId>                           new attempt (signal; starts a new run if the workflow closed)
  starter status <taskId>                                         query status (JSON)
  starter brief <taskId>                                          query the brief (JSON)
  starter follow [-json] <taskId>                                 print phase progress until the task ends
  starter result <taskId>                                         wait for and print the workflow result

Connection: -address (env TEMPORAL_ADDRESS, default 127.0.0.1:7233),
-namespace (env TEMPORAL_NAMESPACE, default "default"), -task-queue
(env KARVI_EDDA_TASK_QUEUE). Flags go before the argument.
`

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(1)
	}
}

type conn struct {
	address, namespace, taskQueue string
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return nil
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "plan", "start", "abort", "redispatch", "status", "brief", "follow", "result":
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
	fs := flag.NewFlagSet("starter "+cmd, flag.ContinueOnError)
	var c conn
	fs.StringVar(&c.address, "address", envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port")
	fs.StringVar(&c.namespace, "namespace", envOr("TEMPORAL_NAMESPACE", "default"), "Temporal namespace")
	fs.StringVar(&c.taskQueue, "task-queue", envOr("KARVI_EDDA_TASK_QUEUE", workflows.DefaultTaskQueue), "task queue")
	follow := fs.Bool("follow", false, "print phase progress until the task ends")
	jsonOut := fs.Bool("json", false, "follow: one JSON object per change")
	reason := fs.String("reason", "", "reason recorded with the signal")
	templates := fs.String("templates", envOr("KARVI_EDDA_TEMPLATES", ""), "directory of operator plan templates (plan)")
	attempt := fs.Int("attempt", 1, "attempt number (plan)")
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%s takes exactly one argument\n%s", cmd, usage)
	}
	arg := fs.Arg(0)

	if cmd == "plan" {
		return printPlan(arg, stdin, stdout, *templates, *attempt)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl, err := dial(c)
	if err != nil {
		return err
	}
	defer cl.Close()

	switch cmd {
	case "start":
		d, err := readDispatch(arg, stdin)
		if err != nil {
			return err
		}
		if err := start(ctx, cl, c, workflows.TaskInput{Dispatch: d}, stdout); err != nil {
			return err
		}
		if *follow {
			return followTask(ctx, cl, d.TaskID, stdout, followOptionsFor(stdout, *jsonOut))
		}
		return nil
	case "abort":
		return signalTask(ctx, cl, arg, workflows.SignalAbort, workflows.AbortSignal{Reason: *reason}, stdout)
	case "redispatch":
		if err := redispatch(ctx, cl, c, arg, *reason, stdout); err != nil {
			return err
		}
		if *follow {
			return followTask(ctx, cl, arg, stdout, followOptionsFor(stdout, *jsonOut))
		}
		return nil
	case "status":
		var s workflows.Status
		if err := query(ctx, cl, arg, workflows.QueryStatus, &s); err != nil {
			return err
		}
		return printJSON(stdout, s)
	case "brief":
		var b mapping.Brief
		if err := query(ctx, cl, arg, workflows.QueryBrief, &b); err != nil {
			return err
		}
		return printJSON(stdout, b)
	case "follow":
		return followTask(ctx, cl, arg, stdout, followOptionsFor(stdout, *jsonOut))
	case "result":
		var res workflows.Result
		if err := cl.GetWorkflow(ctx, workflows.WorkflowID(arg), "").Get(ctx, &res); err != nil {
			return fmt.Errorf("task %s: %w", arg, err)
		}
		return printJSON(stdout, res)
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}

func dial(c conn) (client.Client, error) {
	keys, err := codec.KeysFromEnv()
	if err != nil {
		return nil, err
	}
	opts := client.Options{HostPort: c.address, Namespace: c.namespace, Logger: quietLogger{}}
	if keys != nil {
		opts.DataConverter = codec.DataConverter(keys)
	}
	cl, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", c.address, err)
	}
	return cl, nil
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
	var fsys fs.FS
	if templatesDir != "" {
		fsys = os.DirFS(templatesDir)
	}
	ts, err := mapping.LoadTemplates(fsys)
	if err != nil {
		return fmt.Errorf("templates %s: %w", templatesDir, err)
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

func start(ctx context.Context, cl client.Client, c conn, in workflows.TaskInput, stdout io.Writer) error {
	id := workflows.WorkflowID(in.Dispatch.TaskID)
	summary, details := workflows.StartSummary(in.Dispatch, in.Attempt)
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       id,
		StaticSummary:                            summary,
		StaticDetails:                            details,
		TaskQueue:                                c.taskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, workflows.TaskWorkflowName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return fmt.Errorf("task %s already has a running workflow %s (run %s): abort or redispatch it instead",
				in.Dispatch.TaskID, id, started.RunId)
		}
		return fmt.Errorf("start workflow %s: %w", id, err)
	}
	fmt.Fprintf(stdout, "started %s run %s (attempt %d)\n", id, run.GetRunID(), max(in.Attempt, 1))
	return nil
}

func signalTask(ctx context.Context, cl client.Client, taskID, name string, payload any, stdout io.Writer) error {
	id := workflows.WorkflowID(taskID)
	if err := cl.SignalWorkflow(ctx, id, "", name, payload); err != nil {
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
// closed it starts a new one at the next attempt, with the same dispatch.
func redispatch(ctx context.Context, cl client.Client, c conn, taskID, reason string, stdout io.Writer) error {
	id := workflows.WorkflowID(taskID)
	desc, err := cl.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fmt.Errorf("task %s: no workflow %s to redispatch: %w", taskID, id, err)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return signalTask(ctx, cl, taskID, workflows.SignalRedispatch, workflows.RedispatchSignal{Reason: reason}, stdout)
	}
	var prev workflows.Result
	if err := cl.GetWorkflow(ctx, id, "").Get(ctx, &prev); err != nil {
		return fmt.Errorf("task %s: the last workflow did not end with a result to redispatch from: %w", taskID, err)
	}
	return start(ctx, cl, c, workflows.TaskInput{Dispatch: prev.Dispatch, Attempt: prev.Attempt + 1}, stdout)
}

func query(ctx context.Context, cl client.Client, taskID, name string, out any) error {
	v, err := cl.QueryWorkflow(ctx, workflows.WorkflowID(taskID), "", name)
	if err != nil {
		return fmt.Errorf("query %s of task %s: %w", name, taskID, err)
	}
	return v.Get(out)
}

// rootCause is the innermost application error's message: a person wants
// "dispatch plan: skill: no plan template named ..." rather than the chain
// of workflow and activity wrappers around it.
func rootCause(err error) string {
	msg := err.Error()
	for e := err; e != nil; e = errors.Unwrap(e) {
		var appErr *temporal.ApplicationError
		if errors.As(e, &appErr) {
			msg = appErr.Message()
			e = appErr
		}
	}
	return msg
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// quietLogger keeps the SDK's connection chatter off a CLI's output.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"temporal:", msg}, kv...)...)
}
