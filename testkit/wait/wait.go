package wait

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// The waits every suite polls with. Temporal pushes no query answers and
// the processes under test announce nothing, so a test watches by polling;
// the timeout is a safety net against a hung test, never a timing
// assertion. A wait that times out fails the test saying what it waited
// for and what it saw last. These build without the realserver tag, so
// unit tests use them too.

// every is how often the waits poll unless told otherwise.
const every = 50 * time.Millisecond

// WaitFor calls fetch every 50 ms until cond holds of what it returned, and
// returns that. After timeout the test fails naming what and showing, as
// JSON, what fetch returned last.
func WaitFor[T any](t testing.TB, timeout time.Duration, what string, fetch func() T, cond func(T) bool) T {
	t.Helper()
	var last T
	EventuallyEvery(t, timeout, every, what, func() (any, bool) {
		last = fetch()
		return last, cond(last)
	})
	return last
}

// Eventually calls check every 50 ms until it reports ok. check also
// returns what it saw, which a timeout shows: after timeout the test fails
// naming what and showing what check saw last.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() (seen any, ok bool)) {
	t.Helper()
	EventuallyEvery(t, timeout, every, what, check)
}

// EventuallyEvery is Eventually polling every interval instead, for a wait
// that must act the moment something changes (a kill timed right after a
// write lands) or one whose check is costly.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, what string, check func() (seen any, ok bool)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if seen, ok := poll(ctx, interval, check); !ok {
		t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, show(seen))
	}
}

// Poll calls check every interval until it reports ok, and returns nil; if
// ctx ends first it returns an error naming what and showing what check saw
// last. It never fails a test itself, so a goroutine other than the test's
// may wait with it.
func Poll(ctx context.Context, interval time.Duration, what string, check func() (seen any, ok bool)) error {
	if seen, ok := poll(ctx, interval, check); !ok {
		return fmt.Errorf("waiting for %s: %w; last seen: %s", what, ctx.Err(), show(seen))
	}
	return nil
}

// poll checks before it first waits, so a check that holds at once never
// waits; on ctx's end it returns what check saw last.
func poll(ctx context.Context, interval time.Duration, check func() (seen any, ok bool)) (any, bool) {
	tick := time.NewTicker(max(interval, time.Microsecond))
	defer tick.Stop()
	for {
		seen, ok := check()
		if ok {
			return nil, true
		}
		select {
		case <-ctx.Done():
			return seen, false
		case <-tick.C:
		}
	}
}

// show renders what a wait saw for its failure message: an error or a
// string as it is, anything else as indented JSON.
func show(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case error:
		return v.Error()
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return "\n" + string(data)
}
