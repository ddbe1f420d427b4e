package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/testkit/devenv"
)

// tunedConfig is the dev server configuration the report compares against
// the default: eager activity execution (the worker that completes a
// workflow task starts the activity it scheduled, without a trip through
// matching), and a transfer queue that may poll more than 20 times a second
// (the dev server has one history shard, so every dispatch of every
// workflow goes through that one rate-limited reader).
var tunedConfig = []string{
	"system.enableActivityEagerExecution=true",
	"history.transferProcessorMaxPollRPS=1000",
}

// startServer starts a dev server through devenv, as the tests do, with
// tunedConfig on top when tuned.
func (e *env) startServer(ctx context.Context, tuned bool) (stop func(), err error) {
	if e.cluster != nil {
		return e.startCluster(ctx, tuned)
	}
	logf, err := os.OpenFile(filepath.Join(e.out, "temporal.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	o := devenv.ServerOptions{Log: logf}
	if tuned {
		for _, kv := range tunedConfig {
			o.ExtraArgs = append(o.ExtraArgs, "--dynamic-config-value", kv)
		}
	}
	s, err := devenv.StartServer(sctx, o)
	if err != nil {
		logf.Close()
		return nil, err
	}
	e.serverAddr = s.Addr
	_, port, _ := strings.Cut(e.serverAddr, ":")
	e.serverPID, err = bench.FindPID(func(args []string) bool {
		return slices.Contains(args, "start-dev") && slices.Contains(args, port)
	})
	if err == nil {
		e.cl, err = s.Client()
	}
	if err != nil {
		_ = s.Stop()
		logf.Close()
		return nil, fmt.Errorf("dev server on %s: %w", e.serverAddr, err)
	}
	e.serverTuned = tuned
	e.logf("dev server on %s (pid %d, %s)", e.serverAddr, e.serverPID, map[bool]string{true: "tuned: " + strings.Join(tunedConfig, " "), false: "default configuration"}[tuned])
	return func() {
		e.cl.Close()
		if err := s.Stop(); err != nil {
			e.logf("stop dev server: %v", err)
		}
		logf.Close()
	}, nil
}
