package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// serveLoopback serves h on addr, which must be a loopback address: the
// worker's side endpoints (the payload codec, which decrypts for whoever
// asks, and pprof, which reveals paths and plan names) are for the person
// on this machine only. It returns the function that shuts the server down.
func serveLoopback(name, flagName, addr string, h http.Handler, logger *slog.Logger) (func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flagName, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s %q: the %s endpoint only listens on loopback", flagName, addr, name)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s endpoint: %w", name, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(name+" endpoint stopped", "error", err)
		}
	}()
	logger.Info(name+" endpoint serving", "address", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
