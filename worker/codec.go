package main

import (
	"log/slog"

	"karvi-edda-temporal/internal/codec"
)

// serveCodec serves the payload codec endpoint so the Web UI and the
// temporal CLI can show encrypted payloads to a person who holds the key.
// It decrypts for whoever can reach it, hence loopback only.
func serveCodec(addr string, keys *codec.Keys, logger *slog.Logger) (func(), error) {
	h := codec.NewHandler(keys, codec.HandlerOptions{Origins: codec.OriginsFromEnv()})
	return serveLoopback("codec", "-codec-addr", addr, h, logger)
}
