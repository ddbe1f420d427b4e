package karvi

import (
	"context"
	"fmt"
	"time"
)

// Backoff shapes RetryTransient's waits: Initial, then multiplied by
// Multiplier up to Max, for at most MaxAttempts attempts (0 = until the
// context ends).
type Backoff struct {
	Initial     time.Duration
	Max         time.Duration
	Multiplier  float64
	MaxAttempts int
}

// DefaultBackoff suits a karvi restart: 200ms doubling to 10s, no attempt
// limit (bound it with the context).
var DefaultBackoff = Backoff{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2}

// RetryTransient calls fn until it succeeds, fails with an error that
// IsRetryable rejects, the attempts run out, or ctx ends. It is for callers
// outside Temporal (the sinks in tests, the bench loop); activities let
// Temporal's retry policy do this. The last error is returned, joined with
// the context's error when that is what stopped the loop.
func RetryTransient(ctx context.Context, fn func(context.Context) error, b Backoff) error {
	wait := b.Initial
	if wait <= 0 {
		wait = DefaultBackoff.Initial
	}
	mult := b.Multiplier
	if mult < 1 {
		mult = 1
	}
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !IsRetryable(err) {
			return err
		}
		if b.MaxAttempts > 0 && attempt >= b.MaxAttempts {
			return fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("retry stopped after %d attempts: %w; last error: %w", attempt, ctx.Err(), err)
		case <-t.C:
		}
		wait = time.Duration(float64(wait) * mult)
		if b.Max > 0 && wait > b.Max {
			wait = b.Max
		}
	}
}
