package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/karvifake"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := Summarize(ds)
	require.Equal(t, Summary{N: 100, P50: 50, P95: 95, P99: 99, Max: 100, Mean: 50.5}, s)
	require.Equal(t, Summary{}, Summarize(nil))
	one := Summarize([]time.Duration{3 * time.Millisecond})
	require.Equal(t, 3.0, one.P50)
	require.Equal(t, 3.0, one.P99)
}

func TestMedians(t *testing.T) {
	require.Equal(t, 2.0, Median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}))
	require.Equal(t, 0.0, Median(nil))
	m := MedianSummary([]Summary{{N: 1, P50: 10, P99: 90}, {N: 3, P50: 30, P99: 10}, {N: 2, P50: 20, P99: 50}})
	require.Equal(t, Summary{N: 2, P50: 20, P99: 50}, m)
}

const eventsText = `{"seq":0,"ts":"2026-02-28T03:00:00.000000001Z","type":"plan_start","plan_name":"p","phase_count":1}
{"seq":1,"ts":"2026-02-28T03:00:00.100000002Z","type":"phase_start","phase_id":"work","attempt":1}
{"seq":2,"ts":"2026-02-28T03:00:00.200000003Z","type":"agent_progress","phase_id":"work","n":1}
{"seq":3,"ts":"2026-02-28T03:00:00.300000004Z","type":"phase_passed","phase_id":"work","attempt":1,"duration_ms":300,"cost_usd":0.5}
{"seq":4,"ts":"2026-02-28T03:00:00.400000005Z","type":"plan_completed","phases_passed":1,"total_cost_usd":0.5}
`

var summary = mapping.PlanSummary{Name: "karvi-t1", PhaseIDs: []string{"work"}}

func writeEvents(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

// patches are the bodies the worker would send for the events file.
func patches(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	evs, err := os.ReadFile(path)
	require.NoError(t, err)
	st := mapping.NewBriefState("T1", summary)
	var enc mapping.BriefEncoder
	out := []json.RawMessage{enc.Init(&st).Body}
	var off int64
	for _, line := range splitLines(evs) {
		ev, err := mapping.ParseEvent(line)
		require.NoError(t, err)
		ev.Pos = mapping.Position{Offset: off}
		off += int64(len(line)) + 1
		c, ok := st.Reduce(ev)
		require.True(t, ok)
		out = append(out, enc.Patch(&st, c).Body)
	}
	return out
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, b[start:i])
			start = i + 1
		}
	}
	return out
}

func TestMatch(t *testing.T) {
	path := writeEvents(t, eventsText)
	events, err := ReadEvents(path)
	require.NoError(t, err)
	require.Len(t, events, 5)
	bodies := patches(t, path)
	at := func(i int, ms int) time.Time { return events[i].At.Add(time.Duration(ms) * time.Millisecond) }
	writes := []karvifake.Write{
		{Method: "PATCH", Path: "/api/brief/T1", Body: bodies[0], At: at(0, 1)},  // skeleton: no event
		{Method: "PATCH", Path: "/api/brief/T1", Body: bodies[1], At: at(0, 12)}, // plan_start
		{Method: "POST", Path: "/api/tasks/T1/status", Body: bodies[2], At: at(1, 1)},
		{Method: "PATCH", Path: "/api/brief/T1", Body: bodies[2], At: at(1, 7)},  // phase_start
		{Method: "PATCH", Path: "/api/brief/T1", Body: bodies[2], At: at(1, 99)}, // retried: first receipt counts
		{Method: "PATCH", Path: "/api/brief/T1", Body: bodies[5], At: at(4, 30)}, // plan_completed
		{Method: "PATCH", Path: "/api/brief/T1", Body: json.RawMessage(`{"log":[{"time":"x","agent":"a","action":"y","detail":""}]}`), At: at(4, 40)},
	}
	m := Match(events, writes)
	require.Equal(t, 2, m.Missing, "agent_progress and phase_passed never arrived")
	require.Equal(t, 1, m.Unmatched)
	got := map[string]time.Duration{}
	for _, s := range m.Samples {
		got[s.Type] = s.Latency
	}
	require.Equal(t, map[string]time.Duration{"plan_start": 12 * time.Millisecond,
		"phase_start": 7 * time.Millisecond, "plan_completed": 30 * time.Millisecond}, got)
	require.Equal(t, at(4, 30), m.Last)
}

func TestReadEventsNeedsTimestamps(t *testing.T) {
	_, err := ReadEvents(writeEvents(t, `{"seq":0,"type":"plan_start"}`+"\n"))
	require.ErrorContains(t, err, "ts")
	_, err = ReadEvents(filepath.Join(t.TempDir(), "missing.jsonl"))
	require.Error(t, err)
}

// Both loops deliver every event, in order, with the worker's bodies.
func TestLoopsDeliverWhatTheWorkerWould(t *testing.T) {
	for _, mode := range []LoopMode{Notify, Poll} {
		t.Run(string(mode), func(t *testing.T) {
			fake := karvifake.New(karvifake.Options{})
			url, err := fake.Start()
			require.NoError(t, err)
			t.Cleanup(fake.Close)
			require.NoError(t, fake.AddTask(karvifake.Task{ID: "T1", Status: "pending", BriefPath: true, Brief: json.RawMessage(`{}`)}))
			kc, err := karvi.New(url, "")
			require.NoError(t, err)

			dir := t.TempDir()
			path := filepath.Join(dir, "conductor", "events.jsonl") // not there yet
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			var stats LoopStats
			go func() {
				var err error
				stats, err = Loop{Mode: mode, Interval: 10 * time.Millisecond, EventsPath: path, TaskID: "T1",
					Summary: summary, Karvi: kc}.Run(ctx)
				done <- err
			}()
			// The skeleton arrives first; then the log appears in two parts.
			_, err = fake.WaitWrites(ctx, "T1", 1)
			require.NoError(t, err)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			lines := splitLines([]byte(eventsText))
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			require.NoError(t, err)
			defer f.Close()
			for i, l := range lines {
				_, err := f.Write(append(slices.Clone(l), '\n'))
				require.NoError(t, err)
				if i == 1 {
					_, err = fake.WaitWrites(ctx, "T1", 3)
					require.NoError(t, err)
				}
			}
			require.NoError(t, <-done)
			require.Equal(t, LoopStats{Events: 5, Patches: 5}, stats)
			var got []json.RawMessage
			for _, w := range fake.Writes("T1") {
				got = append(got, w.Body)
			}
			want := patches(t, writeEvents(t, eventsText))
			require.Len(t, got, len(want))
			for i := range want {
				require.JSONEq(t, string(want[i]), string(got[i]), "patch %d", i)
			}
		})
	}
}

func TestProcfs(t *testing.T) {
	rss, err := RSS(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, rss, int64(1<<20))
	_, err = RSS(-1)
	require.Error(t, err)

	// A child with a unique argument list is found by it.
	arg := strconv.FormatInt(time.Now().UnixNano()%1000000+1000000, 10)
	cmd := exec.Command("sleep", arg)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid, err := FindPID(func(args []string) bool { return len(args) == 2 && args[0] == "sleep" && args[1] == arg })
	require.NoError(t, err)
	require.Equal(t, cmd.Process.Pid, pid)
	_, err = FindPID(func([]string) bool { return false })
	require.Error(t, err)

	// CPU time only grows; burn some until it shows (the deadline is a
	// safety net, not a measurement).
	c0, err := CPUTime(os.Getpid())
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Second)
	x := 0
	for c := c0; c <= c0 && time.Now().Before(deadline); c, _ = CPUTime(os.Getpid()) {
		for i := range 1_000_000 {
			x ^= i
		}
	}
	c1, err := CPUTime(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, c1, c0, fmt.Sprint(x))
}
