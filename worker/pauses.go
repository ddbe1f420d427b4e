package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"karvi-edda-temporal/internal/notify"
	"karvi-edda-temporal/limits"
)

// notifySecretEnv holds the webhook's HMAC key: only in the environment,
// never a flag, so it shows in no process list.
const notifySecretEnv = "KARVI_EDDA_NOTIFY_SECRET"

// newNotifier is the webhook notifier of -notify-url, nil without one. The
// function it returns delivers what is queued, for a few seconds, when the
// worker stops, and dead-letters the rest.
func newNotifier(c config, workRoot string, getenv func(string) string, logger *slog.Logger) (*notify.Notifier, func(), error) {
	if c.notifyURL == "" {
		return nil, func() {}, nil
	}
	secret := getenv(notifySecretEnv)
	if secret == "" {
		return nil, nil, fmt.Errorf("-notify-url (KARVI_EDDA_NOTIFY_URL) needs %s, the key receivers check the signature with", notifySecretEnv)
	}
	dead := c.notifyDeadLetter
	if dead == "" {
		dead = filepath.Join(workRoot, "notify-dead-letter.jsonl")
	}
	n, err := notify.New(notify.Config{URL: c.notifyURL, Secret: secret, DeadLetter: dead, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("-notify-url: %w", err)
	}
	return n, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			logger.Warn("notifications lost at shutdown", "error", err)
		}
	}, nil
}

// limitDetector recognises usage limits with the built-in patterns, and
// those of -limit-patterns first.
func limitDetector(c config) (*limits.Detector, error) {
	if c.limitPatterns == "" {
		return limits.Default(), nil
	}
	data, err := os.ReadFile(c.limitPatterns)
	if err != nil {
		return nil, fmt.Errorf("-limit-patterns: %w", err)
	}
	cfg, err := limits.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("-limit-patterns %s: %w", c.limitPatterns, err)
	}
	d, err := limits.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("-limit-patterns %s: %w", c.limitPatterns, err)
	}
	return d, nil
}
