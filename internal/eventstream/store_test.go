package eventstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/canonical"
)

const run = "run-T5"

// ev is a valid event of agent from source at position at.
func ev(source string, at int, state canonical.State) canonical.Event {
	return canonical.Event{
		TS: "2026-02-28T03:00:00Z", RunID: run, Provider: canonical.ProviderSystem, Mode: canonical.ModePipeline,
		AgentID: "test", Role: canonical.RoleTester, State: state, Type: canonical.TypeStateChange,
		Payload: json.RawMessage(`{"n":` + fmt.Sprint(at) + `}`),
		RawRef:  fmt.Sprintf("%s#offset=%d", source, at),
	}
}

func step(seq int) canonical.Event {
	return canonical.FromStep(canonical.Step{Kind: canonical.StepSignal, Signal: "abort", Seq: seq, TS: time.Unix(0, 0)},
		canonical.StepContext{RunID: run, TaskID: "T5", Source: "temporal://default/workflows/karvi-task-T5/r1"})
}

// stored reads the stream file's events, each line checked to be one
// complete JSON object.
func stored(t *testing.T, s *Store) []canonical.Event {
	t.Helper()
	path, err := s.Path(run)
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, len(data) == 0 || data[len(data)-1] == '\n', "file ends with a whole line")
	var out []canonical.Event
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		e, err := canonical.Parse(line)
		require.NoError(t, err, "line %q", line)
		out = append(out, e)
	}
	return out
}

func refs(evs []canonical.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.RawRef)
	}
	return out
}

func TestAppendSkipsWhatTheStreamHolds(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	a := "file:///w/a/events.jsonl"
	res, err := s.Append(run, []canonical.Event{step(1), ev(a, 0, canonical.StateRunning), ev(a, 40, canonical.StateRunning)})
	require.NoError(t, err)
	require.Equal(t, Result{Appended: 3}, res)

	// A retry from an earlier checkpoint sends again what is stored, then more.
	res, err = s.Append(run, []canonical.Event{step(1), step(2), ev(a, 40, canonical.StateRunning), ev(a, 90, canonical.StateDone)})
	require.NoError(t, err)
	require.Equal(t, 2, res.Appended)
	require.Equal(t, 2, res.Skipped)

	// Another process (a new Store on the same directory) knows the marks
	// from the file alone; a replaced source file (gen 1) starts over at 0.
	s2, err := Open(s.Dir())
	require.NoError(t, err)
	b := "file:///w/b/events.jsonl"
	res, err = s2.Append(run, []canonical.Event{ev(a, 90, canonical.StateDone), step(2), step(3), ev(b, 0, canonical.StateRunning),
		{TS: "2026-02-28T03:00:00Z", RunID: run, Provider: "system", AgentID: "test", Role: "tester", State: "done",
			Type: "task_done", RawRef: a + "#gen=1&offset=0"}})
	require.NoError(t, err)
	require.Equal(t, 3, res.Appended)
	require.Equal(t, 2, res.Skipped)

	require.Equal(t, []string{
		"temporal://default/workflows/karvi-task-T5/r1#seq=1", a + "#offset=0", a + "#offset=40",
		"temporal://default/workflows/karvi-task-T5/r1#seq=2", a + "#offset=90",
		// The agent done at offset 90 runs again: Follow's bridge (no
		// raw_ref) takes it back to idle first.
		"temporal://default/workflows/karvi-task-T5/r1#seq=3", "", b + "#offset=0", a + "#gen=1&offset=0",
	}, refs(stored(t, s2)))
}

// Everything stored is validated and redacted; what does not validate is
// dropped and counted, what is odd is kept with a warning, and the state
// transitions are judged against what the file already holds.
func TestAppendValidatesRedactsAndWarns(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	a := "file:///w/a/events.jsonl"
	secret := "sk-ant-api03-" + strings.Repeat("abcdEFGH", 6)
	leaky := ev(a, 0, canonical.StateRunning)
	leaky.Payload = json.RawMessage(`{"message":"key ` + secret + ` and password=hunter2","nested":{"token":"t0ps3cret"}}`)
	bad := ev(a, 10, canonical.StateRunning)
	bad.AgentID = "not an id"
	odd := ev(a, 20, "sleepy")
	odd.TS = "2026-02-28T12:00:00.123456789+09:00" // normalised, without a warning
	res, err := s.Append(run, []canonical.Event{leaky, bad, odd})
	require.NoError(t, err)
	require.Equal(t, 2, res.Appended)
	require.Equal(t, 1, res.Dropped)
	require.Len(t, res.Errors, 1)
	require.Contains(t, res.Errors[0], "agent_id")
	// The enum; running -> idle is bridged (through done), no warning.
	require.Len(t, res.Warnings, 1, "%v", res.Warnings)
	require.Contains(t, res.Warnings[0], "degraded")

	path, _ := s.Path(run)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, leak := range []string{secret[:20], "hunter2", "t0ps3cret"} {
		require.NotContains(t, string(data), leak)
	}
	require.Contains(t, string(data), "***REDACTED***")
	require.Contains(t, string(data), `"ts":"2026-02-28T03:00:00.123Z"`)

	// A new process judges the next event against the file: idle -> done
	// is bridged through running; out of cancelled there is no way, so
	// cancelled -> running stays a warning.
	s2, err := Open(s.Dir())
	require.NoError(t, err)
	res, err = s2.Append(run, []canonical.Event{ev(a, 30, canonical.StateDone)})
	require.NoError(t, err)
	require.Empty(t, res.Warnings)
	res, err = s2.Append(run, []canonical.Event{ev(a, 40, canonical.StateIdle), ev(a, 50, canonical.StateCancelled), ev(a, 60, canonical.StateRunning)})
	require.NoError(t, err)
	require.Len(t, res.Warnings, 1, "%v", res.Warnings)
	require.Contains(t, res.Warnings[0], "cancelled -> running")
	var states []string
	for _, e := range stored(t, s2) {
		states = append(states, string(e.State))
	}
	require.Equal(t, []string{"running", "done", "idle", "running", "done", "idle", "cancelled", "running"}, states)
}

// A writer killed mid-write leaves a partial line; the next append cuts it
// and writes its event again whole.
func TestAppendCutsAPartialLastLine(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	a := "file:///w/a/events.jsonl"
	_, err = s.Append(run, []canonical.Event{ev(a, 0, canonical.StateRunning)})
	require.NoError(t, err)
	line, err := json.Marshal(ev(a, 10, canonical.StateRunning))
	require.NoError(t, err)
	path, _ := s.Path(run)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(line[:len(line)/2])
	require.NoError(t, err)
	require.NoError(t, f.Close())

	s2, err := Open(s.Dir())
	require.NoError(t, err)
	res, err := s2.Append(run, []canonical.Event{ev(a, 0, canonical.StateRunning), ev(a, 10, canonical.StateRunning)})
	require.NoError(t, err)
	require.Equal(t, Result{Appended: 1, Skipped: 1}, res)
	require.Equal(t, []string{a + "#offset=0", a + "#offset=10"}, refs(stored(t, s2)))
}

// Writers in several processes (here: Stores) appending the same events at
// once store each exactly once: the file lock makes them take turns, and
// each reads what the others wrote before it writes. (A writer never
// starts past what the stream holds: a delivery starts at a checkpoint,
// and everything before a checkpoint was stored before it was taken.)
func TestConcurrentWritersStoreEachEventOnce(t *testing.T) {
	dir := t.TempDir()
	a := "file:///w/a/events.jsonl"
	var all []canonical.Event
	for i := range 200 {
		all = append(all, ev(a, i*10, canonical.StateRunning))
	}
	var wg sync.WaitGroup
	for w := range 4 {
		s, err := Open(dir)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each writer sends overlapping windows from the start, as a
			// delivery retried from its last checkpoint does: whatever lies
			// before a window was sent before it.
			for from := 0; from < len(all); from += 5 + w {
				if _, err := s.Append(run, all[from:min(from+15, len(all))]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s, err := Open(dir)
	require.NoError(t, err)
	require.Equal(t, refs(all), refs(stored(t, s)))
}

func TestPathRefusesWhatIsNotARunID(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	for _, id := range []string{"", "T5", "run-", "run-../x", "run-a/b", "run-a.b"} {
		_, err := s.Path(id)
		require.Error(t, err, id)
		_, err = s.Append(id, []canonical.Event{step(1)})
		require.Error(t, err, id)
	}
	p, err := s.Path("run-T_5-x")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(s.Dir(), "run-T_5-x.jsonl"), p)
}

func TestKeyOf(t *testing.T) {
	cases := map[string]struct {
		ok  bool
		src string
		at  position
	}{
		"file:///a/events.jsonl#offset=12":       {true, "file:///a/events.jsonl", position{0, 12}},
		"file:rel/e.jsonl#gen=2&offset=0":        {true, "file:rel/e.jsonl", position{2, 0}},
		"temporal://ns/workflows/w/r#seq=7":      {true, "temporal://ns/workflows/w/r", position{0, 7}},
		"file:///a%23b/e.jsonl#offset=3":         {true, "file:///a%23b/e.jsonl", position{0, 3}},
		"file:///a/events.jsonl":                 {false, "", position{}},
		"file:///a/events.jsonl#line=4":          {false, "", position{}},
		"file:///a/events.jsonl#offset=-1":       {false, "", position{}},
		"file:///a/events.jsonl#gen=x&offset=1":  {false, "", position{}},
		"file:///a/events.jsonl#offset=%zz":      {false, "", position{}},
		"optional://source-pointer":              {false, "", position{}},
		"temporal://ns/workflows/w/r#seq=banana": {false, "", position{}},
	}
	for ref, want := range cases {
		k, ok := keyOf(ref)
		require.Equal(t, want.ok, ok, ref)
		if ok {
			require.Equal(t, key{want.src, want.at}, k, ref)
		}
	}
}

func TestReadPagesAndOffsets(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()

	p, err := s.Read(ctx, run, 0, ReadOptions{})
	require.NoError(t, err)
	require.True(t, p.Missing)
	require.Empty(t, p.Lines)
	require.Zero(t, p.Next)

	_, err = s.Append(run, []canonical.Event{step(1), step(2), step(3)})
	require.NoError(t, err)
	path, _ := s.Path(run)
	data, err := os.ReadFile(path)
	require.NoError(t, err)

	p, err = s.Read(ctx, run, 0, ReadOptions{})
	require.NoError(t, err)
	require.Len(t, p.Lines, 3)
	require.Equal(t, int64(len(data)), p.Next, "Next is the bytes read")
	require.Equal(t, string(data), strings.Join(p.Lines, "\n")+"\n")

	// A small page still holds a whole event, and the next one follows on.
	p1, err := s.Read(ctx, run, 0, ReadOptions{MaxBytes: 10})
	require.NoError(t, err)
	require.Len(t, p1.Lines, 1)
	p2, err := s.Read(ctx, run, p1.Next, ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, p.Lines[1:], p2.Lines)

	for _, off := range []int64{-1, 5, int64(len(data)) + 1} {
		_, err := s.Read(ctx, run, off, ReadOptions{})
		require.True(t, errors.Is(err, ErrOffset), "offset %d: %v", off, err)
	}
	_, err = s.Read(ctx, "run-other", 10, ReadOptions{})
	require.True(t, errors.Is(err, ErrOffset), "offset into a stream with no file: %v", err)
}

// A read at the end waits for the next append and returns it at once.
func TestReadWaitsForTheNextEvent(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	_, err = s.Append(run, []canonical.Event{step(1)})
	require.NoError(t, err)
	p, err := s.Read(context.Background(), run, 0, ReadOptions{})
	require.NoError(t, err)

	got := make(chan Page, 1)
	errc := make(chan error, 1)
	go func() {
		q, err := s.Read(context.Background(), run, p.Next, ReadOptions{Wait: time.Minute})
		errc <- err
		got <- q
	}()
	_, err = s.Append(run, []canonical.Event{step(2)})
	require.NoError(t, err)
	require.NoError(t, <-errc)
	q := <-got
	require.Len(t, q.Lines, 1)
	require.Contains(t, q.Lines[0], "#seq=2")

	// Nothing new: the wait ends empty, where it began.
	q, err = s.Read(context.Background(), run, q.Next, ReadOptions{Wait: time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, q.Lines)
}
