package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/testkit/karvifake"
)

type taskFlags []karvifake.Task

func (f *taskFlags) String() string { return fmt.Sprint(len(*f), " tasks") }

func (f *taskFlags) Set(v string) error {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("want ID:STATUS[:brief|path|none], got %q", v)
	}
	t := karvifake.Task{ID: parts[0], Status: parts[1]}
	mode := "none"
	if len(parts) == 3 {
		mode = parts[2]
	}
	switch mode {
	case "brief":
		t.BriefPath, t.Brief = true, []byte(`{}`)
	case "path":
		t.BriefPath = true
	case "none", "":
	default:
		return fmt.Errorf("brief mode %q: want brief, path or none", mode)
	}
	*f = append(*f, t)
	return nil
}

func main() {
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "karvifake:", err)
		os.Exit(1)
	}
}

// config is what the command line and the environment ask for.
type config struct {
	opts  karvifake.Options
	tasks taskFlags
}

// parseArgs reads the flags; -token, -rate-limit and -time-scale default
// to KARVI_API_TOKEN, KARVI_RATE_LIMIT and KARVI_EDDA_TIME_SCALE, so one
// environment sets the fake and the worker alike.
func parseArgs(args []string, getenv func(string) string) (config, error) {
	var c config
	fs := flag.NewFlagSet("karvifake", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:3461", "listen address (loopback only)")
	token := fs.String("token", "", "admin bearer token (default $KARVI_API_TOKEN; empty = no auth)")
	operator := fs.String("operator-token", "", "operator-role bearer token")
	viewer := fs.String("viewer-token", "", "viewer-role bearer token")
	rateLimit := fs.String("rate-limit", getenv("KARVI_RATE_LIMIT"), "requests a minute per client address, or off, as karvi's KARVI_RATE_LIMIT (default 120)")
	scale := timescale.One
	fs.Var(&scale, "time-scale", "how many times faster than real time the rate limit's minute passes (at 60 it lasts a second), as the worker's -time-scale (default $"+timescale.Env+", else 1)")
	fs.Var(&c.tasks, "task", "task as ID:STATUS[:brief|path|none] (repeatable)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *token == "" {
		*token = getenv("KARVI_API_TOKEN")
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "time-scale" })
	if v := getenv(timescale.Env); !given && v != "" {
		s, err := timescale.Parse(v)
		if err != nil {
			return c, fmt.Errorf("%s: %w", timescale.Env, err)
		}
		scale = s
	}
	limit, err := parseRateLimit(*rateLimit)
	if err != nil {
		return c, err
	}
	c.opts = karvifake.Options{Addr: *addr, Token: *token, OperatorToken: *operator, ViewerToken: *viewer,
		RateLimit: limit, TimeScale: scale}
	return c, nil
}

func run() error {
	c, err := parseArgs(os.Args[1:], os.Getenv)
	if err != nil {
		return err
	}
	tasks := c.tasks
	srv := karvifake.New(c.opts)
	for _, t := range tasks {
		if err := srv.AddTask(t); err != nil {
			return err
		}
	}
	url, err := srv.Start()
	if err != nil {
		return err
	}
	defer srv.Close()
	auth := "off"
	if c.opts.Token != "" || c.opts.OperatorToken != "" || c.opts.ViewerToken != "" {
		auth = "on"
	}
	// Catch SIGTERM before saying it listens: a caller may signal as soon
	// as it reads the line.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("karvifake listening on %s (auth %s, %d tasks)\n", url, auth, len(tasks))
	<-ctx.Done()
	return nil
}

// parseRateLimit reads -rate-limit as karvi reads KARVI_RATE_LIMIT: empty
// for its default, off, or a positive number of requests a minute.
func parseRateLimit(v string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return 0, nil
	case "off", "0", "false":
		return karvifake.RateLimitOff, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("-rate-limit %q: want off or a number of requests a minute", v)
	}
	return n, nil
}
