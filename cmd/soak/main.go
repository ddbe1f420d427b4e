// Command soak is `make soak`: hours of the runtime's life in minutes. It
// starts a Temporal dev server (on a database file, so it can be
// restarted), the karvi fake at karvi's default rate limit, a webhook
// receiver and two worker hosts running the conductor simulator, with
// every period of the runtime compressed by one time scale; it then plays
// a seeded mix of tasks, runs, board tasks, people's actions and faults
// (soak.NewMix), waits for everything to end, stops what it started by
// process id, checks the invariants (docs/soak.md) and writes a report.
//
//	soak [-duration 10m] [-seed N] [-scale 60] [-out .run/soak]
//
// Each flag has an environment variable that sets its default:
// SOAK_DURATION, SOAK_SEED (random when unset), SOAK_SCALE, SOAK_OUT. The
// first line printed names the seed; the last line is
//
//	soak seed=<n>: <tasks> tasks, <runs> runs, <kills> kills, <v> violations
//
// and the exit status is 1 when a violation was found, 2 when the soak
// itself could not run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// config is what a soak is asked to do.
type config struct {
	duration time.Duration
	seed     int64
	scale    float64
	out      string
}

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	fmt.Printf("soak seed=%d duration=%s scale=%g out=%s (replay: make soak SOAK_SEED=%d SOAK_DURATION=%s SOAK_SCALE=%g)\n",
		cfg.seed, cfg.duration, cfg.scale, cfg.out, cfg.seed, cfg.duration, cfg.scale)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
	}
	fmt.Printf("soak seed=%d: %d tasks, %d runs, %d kills, %d violations\n", cfg.seed, sum.tasks, sum.runs, sum.kills, sum.violations)
	switch {
	case err != nil:
		os.Exit(2)
	case sum.violations > 0:
		os.Exit(1)
	}
}

// parseConfig reads the flags, each defaulting to its SOAK_ variable.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	dur := fs.String("duration", envOr(getenv, "SOAK_DURATION", "10m"), "how long the mix runs (SOAK_DURATION); the end waits for what it started on top")
	seed := fs.String("seed", getenv("SOAK_SEED"), "the mix's seed (SOAK_SEED); random when empty")
	scale := fs.String("scale", envOr(getenv, "SOAK_SCALE", "60"), "time scale of the runtime's periods (SOAK_SCALE): 60 makes a minute last a second")
	fs.StringVar(&cfg.out, "out", envOr(getenv, "SOAK_OUT", ".run/soak"), "directory for the report, the journal and every process's log (SOAK_OUT); emptied first")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q: the soak takes only flags", fs.Arg(0))
	}
	d, err := time.ParseDuration(*dur)
	if err != nil || d < time.Minute {
		return cfg, fmt.Errorf("duration %q (SOAK_DURATION): want a Go duration of at least 1m, such as 3m or 1h", *dur)
	}
	cfg.duration = d
	if *seed == "" {
		cfg.seed = rand.Int64N(1 << 53)
	} else if cfg.seed, err = strconv.ParseInt(*seed, 10, 64); err != nil {
		return cfg, fmt.Errorf("seed %q (SOAK_SEED): want an integer", *seed)
	}
	cfg.scale, err = strconv.ParseFloat(*scale, 64)
	if err != nil || cfg.scale < 1 || cfg.scale > 3600 {
		return cfg, fmt.Errorf("scale %q (SOAK_SCALE): want a number from 1 (real time) to 3600", *scale)
	}
	if cfg.out == "" {
		return cfg, errors.New("out (SOAK_OUT): want a directory")
	}
	if cfg.out, err = filepath.Abs(cfg.out); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}
