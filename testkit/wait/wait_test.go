package wait

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// its goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failureOf runs wait on a recorder in a goroutine of its own and returns what
// it failed with, "" if it did not.
func failureOf(t *testing.T, wait func(tb testing.TB)) string {
	f := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(f)
	}()
	<-done
	return f.msg
}

func TestWaitForReturnsTheFirstValueThatHolds(t *testing.T) {
	n := 0
	got := WaitFor(t, time.Minute, "n to reach 3", func() int { n++; return n }, func(v int) bool { return v >= 3 })
	require.Equal(t, 3, got)
}

func TestWaitsFailSayingWhatTheyAwaitedAndSawLast(t *testing.T) {
	for _, c := range []struct {
		name string
		wait func(tb testing.TB)
		want string
	}{
		{"WaitFor shows the last value as JSON", func(tb testing.TB) {
			WaitFor(tb, 20*time.Millisecond, "a green light", func() map[string]string { return map[string]string{"light": "red"} },
				func(m map[string]string) bool { return m["light"] == "green" })
		}, "timed out after 20ms waiting for a green light; last seen: \n{\n  \"light\": \"red\"\n}"},
		{"an error as its text", func(tb testing.TB) {
			Eventually(tb, 20*time.Millisecond, "the server", func() (any, bool) { return errors.New("connection refused"), false })
		}, "timed out after 20ms waiting for the server; last seen: connection refused"},
		{"a string as it is", func(tb testing.TB) {
			EventuallyEvery(tb, 20*time.Millisecond, time.Millisecond, "a log line", func() (any, bool) { return "started", false })
		}, "timed out after 20ms waiting for a log line; last seen: started"},
		{"nothing seen", func(tb testing.TB) {
			Eventually(tb, 0, "anything", func() (any, bool) { return nil, false })
		}, "timed out after 0s waiting for anything; last seen: nothing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, failureOf(t, c.wait))
		})
	}
}

func TestEventuallyChecksBeforeItWaits(t *testing.T) {
	// A check that holds by its first call never waits.
	calls := 0
	require.Empty(t, failureOf(t, func(tb testing.TB) {
		Eventually(tb, 0, "at once", func() (any, bool) { calls++; return nil, true })
	}))
	require.Equal(t, 1, calls)
}

func TestPollReturnsTheFailureInsteadOfFailing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := Poll(ctx, time.Millisecond, "docs", func() (any, bool) { return []string{"implement"}, false })
	require.EqualError(t, err, "waiting for docs: context deadline exceeded; last seen: \n[\n  \"implement\"\n]")
	require.NoError(t, Poll(context.Background(), time.Millisecond, "at once", func() (any, bool) { return nil, true }))
}
