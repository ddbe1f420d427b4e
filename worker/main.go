package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"karvi-edda-temporal/mapping"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/accountact"
	"karvi-edda-temporal/activities/intakeact"
	"karvi-edda-temporal/activities/intentact"
	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/activities/slotact"
	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/eventstream"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/metrics"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/temporalconn"
	"karvi-edda-temporal/stalls"
	"karvi-edda-temporal/workflows"
)

func main() {
	c, err := parseFlags(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(os.Stdout)
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n(worker -h lists the flags and their environment variables)\n", err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	var templatesFS fs.FS
	if c.templates != "" {
		templatesFS = os.DirFS(c.templates)
	}
	templates, err := mapping.LoadTemplates(templatesFS)
	if err != nil {
		return fmt.Errorf("load templates %s: %w", c.templates, err)
	}
	s, err := newSink(c)
	if err != nil {
		return err
	}
	layout, err := activities.NewLayout(c.workRoot)
	if err != nil {
		return err
	}
	eventsDir := c.eventsDir
	if eventsDir == "" {
		eventsDir = activities.DefaultEventsDir(layout.Root())
	}
	// A directory the worker cannot write stops it now, not every tail later.
	if _, err := eventstream.Open(eventsDir); err != nil {
		return err
	}

	conn, err := temporalconn.Load(c.conn)
	if err != nil {
		return err
	}
	// Metrics are served before the client exists: the SDK records its
	// own on the handler the client is dialled with.
	var rec *metrics.Recorder
	if c.metricsAddr != "" {
		e, err := newExporter(logger)
		if err != nil {
			return err
		}
		shutdown, err := serveMetrics(c.metricsAddr, e, logger)
		if err != nil {
			return err
		}
		defer shutdown()
		conn.Options.MetricsHandler = e.SDK
		rec = e.Recorder
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	spans, stopTracing, err := setupTracing(ctx, &conn, eventsDir, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	cl, err := conn.Dial(ctx, sdklog.NewStructuredLogger(logger))
	if err != nil {
		return err
	}
	defer cl.Close()

	if c.registerSearchAttrs {
		if err := ensureSearchAttributes(ctx, cl.OperatorService(), conn.Options.Namespace); err != nil {
			return err
		}
	}

	if c.codecAddr != "" {
		if conn.Keys == nil {
			return errors.New("-codec-addr needs KARVI_TEMPORAL_CODEC_KEY")
		}
		shutdown, err := serveCodec(c.codecAddr, conn.Keys, logger)
		if err != nil {
			return err
		}
		defer shutdown()
	}

	if c.pprofAddr != "" {
		shutdown, err := servePprof(c.pprofAddr, logger)
		if err != nil {
			return err
		}
		defer shutdown()
	}

	if c.intakeKarvi {
		if err := oneBoardPerNamespace(ctx, cl, conn.Options.DataConverter, conn.Options.Namespace, c.karviURL); err != nil {
			return err
		}
	}

	host, err := hostOf(c)
	if err != nil {
		return err
	}
	sweepEvery, err := fencePeriod(os.Getenv, c.timeScale)
	if err != nil {
		return err
	}
	opts, hostOpts, err := workerOptions(c, host)
	if err != nil {
		return err
	}
	detector, err := limitDetector(c)
	if err != nil {
		return err
	}
	notifier, closeNotifier, err := newNotifier(c, layout.Root(), os.Getenv, logger)
	if err != nil {
		return err
	}
	defer closeNotifier()
	w := worker.New(cl, conn.TaskQueue, opts)
	workflows.Register(w)
	cfg := activities.Config{
		WorkRoot:      layout.Root(),
		Conductor:     c.conductor,
		Templates:     templates,
		StopGrace:     c.stopGrace,
		TailLinger:    c.tailLinger,
		TailPoll:      c.tailPoll,
		TailHeartbeat: c.tailHeartbeat,
		EventsDir:     eventsDir,
		Host:          host,
		Limits:        detector,
		StallAfter:    c.stallAfter,
		OnStall:       stalls.Action(c.onStall),
		Account:       workerAccount(c, conn.TaskQueue),
		Scale:         c.timeScale,
	}
	joins := &accountapi.Joins{Client: cl, Scale: c.timeScale}
	accounts := &accountact.Activities{Temporal: cl, Joins: joins}
	acts := &taskact.Activities{Config: cfg, Sink: rec.Sink(s), Metrics: rec, Notifier: notifier, Accounts: joins, Traces: spans}
	w.RegisterActivity(acts)
	w.RegisterActivity(&runact.Activities{Config: cfg, Temporal: cl, Traces: spans})
	w.RegisterActivity(&runact.GitActivities{Config: cfg})
	slotActs := &slotact.Activities{Temporal: cl, Scale: c.timeScale}
	w.RegisterActivity(slotActs)
	w.RegisterActivity(accounts)
	w.RegisterActivity(&intentact.Activities{Temporal: cl, Scale: c.timeScale})
	(&intakeact.Activities{Temporal: cl, Karvi: karviClient(c), Scale: c.timeScale}).Register(w)
	hw := newHostWorker(cl, conn.TaskQueue, host, hostOpts, acts)
	pw := newPoolWorker(cl, conn.TaskQueue, host, slotActs)
	logger.Info("worker starting", "temporal", conn, "host", host,
		"workRoot", layout.Root(), "events", eventsDir, "conductor", c.conductor, "sink", c.sinkKind, "account", cfg.Account)
	if err := hw.Start(); err != nil {
		return fmt.Errorf("start the worker of host %s: %w", host, err)
	}
	if err := pw.Start(); err != nil {
		hw.Stop()
		return fmt.Errorf("start the worker of the slot pools: %w", err)
	}
	if err := w.Start(); err != nil {
		stopAll(hw, pw)
		return fmt.Errorf("start worker: %w", err)
	}
	swept := sweepStaleRuns(ctx, cl, acts, host, sweepEvery, logger)
	if c.intakeKarvi {
		if err := startIntake(ctx, cl, c, conn.TaskQueue, logger); err != nil {
			stop() // the sweep ends with the context
			stopAll(hw, pw, w)
			<-swept
			return err
		}
	}
	<-ctx.Done()
	// Stopping the workers leaves every conductor running: they are
	// detached on purpose, and the next worker of this host re-attaches to
	// them.
	stopAll(hw, pw, w)
	<-swept
	return nil
}

func newSink(c config) (sink.Sink, error) {
	if c.sinkKind == "file" {
		return sink.NewFile(c.sinkDir)
	}
	kc, err := karviClient(c)(c.karviURL)
	if err != nil {
		return nil, fmt.Errorf("karvi sink: %w", err)
	}
	return sink.NewKarvi(kc), nil
}

// karviClient makes karvi clients with the worker's token and rate limit;
// every client of one address shares the limit.
func karviClient(c config) func(string) (*karvi.Client, error) {
	return func(baseURL string) (*karvi.Client, error) {
		// Below the status activity's 15 s limit, so a hung karvi is an
		// HTTP timeout (retried) rather than an activity timeout.
		return karvi.New(baseURL, os.Getenv("KARVI_API_TOKEN"), karvi.WithTimeout(10*time.Second),
			karvi.WithRateLimit(int(c.karviRateLimit)), karvi.WithTimeScale(c.timeScale))
	}
}

// startIntake starts the intake workflow of the board at -karvi-url, or
// leaves the one already running: there is one per board, whichever
// worker started it.
func startIntake(ctx context.Context, cl client.Client, c config, taskQueue string, logger *slog.Logger) error {
	id := intakeapi.WorkflowID(c.karviURL)
	run, err := intakeapi.Intakes{Client: cl, TaskQueue: taskQueue}.Start(ctx, intakeInput(c, taskQueue))
	if err != nil {
		return fmt.Errorf("start the karvi intake %s: %w", id, err)
	}
	logger.Info("karvi intake running", "workflow", id, "run", run.GetRunID(), "board", c.karviURL, "runtimeHint", c.intakeHint)
	return nil
}

// intakeInput starts the intake of -karvi-url at the worker's settings
// and time scale.
func intakeInput(c config, taskQueue string) intakeapi.Input {
	in := intakeapi.Input{BoardURL: c.karviURL, RuntimeHint: c.intakeHint, TaskQueue: taskQueue, Poll: c.intakePoll}
	if c.timeScale.Scaled() {
		in.TimeScale = float64(c.timeScale)
	}
	return in
}

// ensureSearchAttributes adds the workflow's keyword attributes when the
// namespace lacks them: without them every upsert would fail the workflow
// task. A server that does not allow it (no namespace admin right) gets a
// message with the exact command an operator runs instead.
func ensureSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	var names []string
	for _, name := range taskapi.SearchAttributeNames() {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
			names = append(names, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		slices.Sort(names)
		cmd := "temporal operator search-attribute create --namespace " + namespace
		for _, name := range names {
			cmd += " --name " + name + " --type Keyword"
		}
		return fmt.Errorf("add search attributes %v to namespace %s: %w (an operator adds them once with `%s`; a worker that may not even list them runs with -register-search-attributes=false)",
			names, namespace, err, cmd)
	}
	return nil
}
