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
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/codec"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/workflows"
)

type config struct {
	address, namespace, taskQueue  string
	workRoot, conductor, templates string
	sinkKind, sinkDir, karviURL    string
	stopGrace                      time.Duration
	tailLinger, tailPoll           time.Duration
	registerSearchAttrs            bool
	codecAddr                      string
	pprofAddr                      string
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.StringVar(&c.address, "address", envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	fs.StringVar(&c.namespace, "namespace", envOr("TEMPORAL_NAMESPACE", "default"), "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&c.taskQueue, "task-queue", envOr("KARVI_EDDA_TASK_QUEUE", workflows.DefaultTaskQueue), "task queue (env KARVI_EDDA_TASK_QUEUE)")
	fs.StringVar(&c.workRoot, "work-root", envOr("KARVI_EDDA_WORK_ROOT", ".run/work"), "directory holding every task's workspace and run records (env KARVI_EDDA_WORK_ROOT)")
	fs.StringVar(&c.conductor, "conductor", envOr("EDDA_BIN", "edda"), "the edda binary, or the simulator (env EDDA_BIN)")
	fs.StringVar(&c.templates, "templates", envOr("KARVI_EDDA_TEMPLATES", ""), "directory of operator plan templates, one YAML per skill (env KARVI_EDDA_TEMPLATES)")
	fs.StringVar(&c.sinkKind, "sink", envOr("KARVI_EDDA_SINK", "file"), "where briefs and task status go: file or karvi (env KARVI_EDDA_SINK)")
	fs.StringVar(&c.sinkDir, "sink-dir", envOr("KARVI_EDDA_SINK_DIR", ".run/briefs"), "directory of the file sink (env KARVI_EDDA_SINK_DIR)")
	fs.StringVar(&c.karviURL, "karvi-url", envOr("KARVI_URL", "http://localhost:3461"), "karvi base URL for the karvi sink (env KARVI_URL); the token comes only from KARVI_API_TOKEN")
	fs.DurationVar(&c.stopGrace, "stop-grace", 10*time.Second, "time a stopped conductor gets between TERM and KILL")
	fs.DurationVar(&c.tailLinger, "tail-linger", 5*time.Millisecond, "how long the tail keeps collecting after the first new line, to batch bursts (a conductor writes phase_passed and the next phase_start 0.2-3 ms apart; every event waits this long)")
	fs.DurationVar(&c.tailPoll, "tail-poll", 250*time.Millisecond, "fallback poll interval of the event-log tail")
	fs.BoolVar(&c.registerSearchAttrs, "register-search-attributes", true, "add the workflow's search attributes to the namespace if missing")
	fs.StringVar(&c.codecAddr, "codec-addr", "", "serve the payload codec endpoint for the Web UI and CLI on this address (127.0.0.1:port); needs KARVI_TEMPORAL_CODEC_KEY")
	fs.StringVar(&c.pprofAddr, "pprof-addr", "", "serve net/http/pprof on this loopback address (127.0.0.1:port), for profiling")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.sinkKind != "file" && c.sinkKind != "karvi" {
		return c, fmt.Errorf("-sink must be file or karvi, got %q", c.sinkKind)
	}
	return c, nil
}

func run(args []string) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
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

	keys, err := codec.KeysFromEnv()
	if err != nil {
		return err
	}
	opts := client.Options{
		HostPort:  c.address,
		Namespace: c.namespace,
		Logger:    sdklog.NewStructuredLogger(logger),
	}
	if keys != nil {
		opts.DataConverter = codec.DataConverter(keys)
	}
	cl, err := client.Dial(opts)
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", c.address, err)
	}
	defer cl.Close()

	if c.registerSearchAttrs {
		if err := ensureSearchAttributes(cl, c.namespace); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.codecAddr != "" {
		if keys == nil {
			return errors.New("-codec-addr needs KARVI_TEMPORAL_CODEC_KEY")
		}
		shutdown, err := serveCodec(c.codecAddr, keys, logger)
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

	w := worker.New(cl, c.taskQueue, worker.Options{})
	workflows.Register(w)
	w.RegisterActivity(&activities.Activities{
		Config: activities.Config{
			WorkRoot:   layout.Root(),
			Conductor:  c.conductor,
			Templates:  templates,
			StopGrace:  c.stopGrace,
			TailLinger: c.tailLinger,
			TailPoll:   c.tailPoll,
		},
		Sink: s,
	})
	logger.Info("worker starting", "address", c.address, "namespace", c.namespace,
		"taskQueue", c.taskQueue, "workRoot", layout.Root(), "conductor", c.conductor, "sink", c.sinkKind)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	<-ctx.Done()
	// Stopping the worker leaves every conductor running: they are detached
	// on purpose, and the next worker re-attaches to them.
	w.Stop()
	return nil
}

func newSink(c config) (sink.Sink, error) {
	if c.sinkKind == "file" {
		return sink.NewFile(c.sinkDir)
	}
	// Below the status activity's 15 s limit, so a hung karvi is an HTTP
	// timeout (retried) rather than an activity timeout.
	kc, err := karvi.New(c.karviURL, os.Getenv("KARVI_API_TOKEN"), karvi.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("karvi sink: %w", err)
	}
	return sink.NewKarvi(kc), nil
}

// ensureSearchAttributes adds the workflow's keyword attributes when the
// namespace lacks them: without them every upsert would fail the workflow
// task. A server that does not allow it gets a clear message instead.
func ensureSearchAttributes(cl client.Client, namespace string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	op := cl.OperatorService()
	have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range workflows.SearchAttributeNames() {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("add search attributes %v to namespace %s (add them once with `temporal operator search-attribute create`, or start the worker with -register-search-attributes=false): %w",
			workflows.SearchAttributeNames(), namespace, err)
	}
	return nil
}
