package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"karvi-edda-temporal/internal/codec"
)

// serveCodec serves the payload codec endpoint so the Web UI and the
// temporal CLI can show encrypted payloads to a person who holds the key.
// It listens on loopback only: the endpoint decrypts for whoever asks.
func serveCodec(addr string, keys *codec.Keys, logger *slog.Logger) (func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("-codec-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("-codec-addr %q: the codec endpoint decrypts for anyone who can reach it, so it only listens on loopback", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("codec endpoint: %w", err)
	}
	srv := &http.Server{Handler: codec.Handler(keys), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("codec endpoint stopped", "error", err)
		}
	}()
	logger.Info("codec endpoint serving", "address", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
