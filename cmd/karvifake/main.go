package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

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
		fmt.Fprintln(os.Stderr, "karvifake:", err)
		os.Exit(1)
	}
}

func run() error {
	var tasks taskFlags
	addr := flag.String("addr", "127.0.0.1:3461", "listen address (loopback only)")
	token := flag.String("token", "", "admin bearer token (default $KARVI_API_TOKEN; empty = no auth)")
	operator := flag.String("operator-token", "", "operator-role bearer token")
	viewer := flag.String("viewer-token", "", "viewer-role bearer token")
	rateLimit := flag.String("rate-limit", os.Getenv("KARVI_RATE_LIMIT"), "requests a minute per client address, or off, as karvi's KARVI_RATE_LIMIT (default 120)")
	flag.Var(&tasks, "task", "task as ID:STATUS[:brief|path|none] (repeatable)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if *token == "" {
		*token = os.Getenv("KARVI_API_TOKEN")
	}

	limit, err := parseRateLimit(*rateLimit)
	if err != nil {
		return err
	}
	srv := karvifake.New(karvifake.Options{Addr: *addr, Token: *token, OperatorToken: *operator, ViewerToken: *viewer, RateLimit: limit})
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
	if *token != "" || *operator != "" || *viewer != "" {
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
