package main

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
)

// servePprof serves net/http/pprof for benchmarks and live diagnosis of a
// busy worker, on loopback only and only when asked for.
func servePprof(addr string, logger *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serveLoopback("pprof", "-pprof-addr", addr, mux, logger)
}
