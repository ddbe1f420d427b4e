package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/internal/devenv"
	"karvi-edda-temporal/workflows"
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

// startServer starts a dev server: through devenv, as the tests do, or
// with tunedConfig on top of the same options.
func (e *env) startServer(ctx context.Context, tuned bool) (stop func(), err error) {
	logf, err := os.OpenFile(filepath.Join(e.out, "temporal.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var stopServer func() error
	if !tuned {
		s, err := devenv.StartServer(sctx, devenv.ServerOptions{Log: logf})
		if err != nil {
			logf.Close()
			return nil, err
		}
		e.serverAddr, stopServer = s.Addr, s.Stop
	} else {
		port, err := devenv.FreePort()
		if err != nil {
			logf.Close()
			return nil, err
		}
		cli, err := devenv.Binary("temporal")
		if err != nil {
			logf.Close()
			return nil, err
		}
		var attrs []temporal.SearchAttributeUpdate
		for _, name := range workflows.SearchAttributeNames() {
			attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(name).ValueSet(""))
		}
		var extra []string
		for _, kv := range tunedConfig {
			extra = append(extra, "--dynamic-config-value", kv)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		dev, err := testsuite.StartDevServer(sctx, testsuite.DevServerOptions{
			ExistingPath: cli, ClientOptions: &client.Options{HostPort: addr, Logger: quiet{}},
			LogLevel: "error", SearchAttributes: temporal.NewSearchAttributes(attrs...),
			ExtraArgs: extra, Stdout: logf, Stderr: logf,
		})
		if err != nil {
			logf.Close()
			return nil, fmt.Errorf("start tuned dev server: %w", err)
		}
		e.serverAddr, stopServer = addr, dev.Stop
	}
	_, port, _ := strings.Cut(e.serverAddr, ":")
	e.serverPID, err = bench.FindPID(func(args []string) bool {
		return slices.Contains(args, "start-dev") && slices.Contains(args, port)
	})
	if err == nil {
		e.cl, err = client.Dial(client.Options{HostPort: e.serverAddr, Logger: quiet{}})
	}
	if err != nil {
		_ = stopServer()
		logf.Close()
		return nil, fmt.Errorf("dev server on %s: %w", e.serverAddr, err)
	}
	e.serverTuned = tuned
	e.logf("dev server on %s (pid %d, %s)", e.serverAddr, e.serverPID, map[bool]string{true: "tuned: " + strings.Join(tunedConfig, " "), false: "default configuration"}[tuned])
	return func() {
		e.cl.Close()
		if err := stopServer(); err != nil {
			e.logf("stop dev server: %v", err)
		}
		logf.Close()
	}, nil
}

type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
