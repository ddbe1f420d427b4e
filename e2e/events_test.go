//go:build realserver

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
)

// `starter events -follow`, run beside a task whose worker is SIGKILLed in
// the middle and started again, prints every event exactly once and in
// order: the workflow's steps around the conductor's events, which are
// those of the conductor's events.jsonl, line for line. What it printed is
// the stream file byte for byte, and the secrets an agent leaked into the
// conductor's events are in neither. The workflow continues as new on the
// way, which changes nothing either.
func TestEventsFollowAcrossWorkerKill(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	const id = "EV1"
	r.Workspace(id)
	r.Track(taskapi.EventsWorkflowID(id))
	key := "sk-ant-api03-" + strings.Repeat("Zq9xK2", 10)
	password := "hunter2Quokka"
	msg := "Events task. " + testrig.ExampleCosts +
		` [sim phase=implement crash=1 error="agent leaked ` + key + ` and password=` + password + `"]` +
		" [sim phase=test delay=4s events=4]"
	// The workflow continues as new every two checkpoints, too.
	run := r.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(t, id, msg),
		Tuning: &taskapi.Tuning{ContinueAsNewAfterPolls: 2, CheckpointEvery: 200 * time.Millisecond}})

	starter, err := devenv.Binary("starter")
	require.NoError(t, err)
	env := append(os.Environ(), "TEMPORAL_CONFIG_FILE="+filepath.Join(r.Dir, "no-profile.toml"))
	starterCmd := func(args ...string) *exec.Cmd {
		cmd := exec.Command(starter, append(args, "-address", r.Server.Addr, "-task-queue", r.Queue, id)...)
		cmd.Env = env
		return cmd
	}
	var followed lockedBuffer
	var followErr bytes.Buffer
	follow := starterCmd("events", "-follow", "-json")
	follow.Stdout, follow.Stderr = &followed, &followErr
	require.NoError(t, follow.Start())
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	t.Cleanup(func() { _ = follow.Process.Kill() })

	// The worker dies while the test phase runs and the follower prints
	// it; the conductor writes on meanwhile (its progress events) and the
	// new worker takes up the tail.
	r.WaitFor(id, "a continue-as-new", func(s taskapi.Status) bool { return s.ContinuedAsNew > 0 })
	phase := r.WaitPhase(id, "test")
	events := r.EventsPath(id, phase.PlanName)
	waitUntil(t, "the follower prints the test phase", func() bool {
		return strings.Contains(followed.String(), `"agent_id":"test"`)
	})
	before := countLines(t, events)
	require.NoError(t, r.KillWorker())
	waitUntil(t, "the conductor writes while no worker runs", func() bool { return countLines(t, events) > before })
	r.StartWorker()

	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	select {
	case err := <-done:
		require.NoError(t, err, "starter events -follow: %s", followErr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("starter events -follow did not end after the task did: %s", followErr.String())
	}

	// What -follow printed is the stream file, byte for byte.
	stored, err := os.ReadFile(filepath.Join(r.WorkRoot, "events", taskapi.StreamRunID(id)+".jsonl"))
	require.NoError(t, err)
	require.Equal(t, string(stored), followed.String())

	// Every event valid, none twice.
	lines := strings.Split(strings.TrimSuffix(followed.String(), "\n"), "\n")
	var evs []canonical.Event
	seen := map[string]bool{}
	for i, l := range lines {
		ev, err := canonical.Parse([]byte(l))
		require.NoError(t, err, "line %d", i)
		_, _, err = canonical.Validate(ev)
		require.NoError(t, err, "line %d: %s", i, l)
		require.False(t, seen[ev.RawRef], "line %d: %s printed twice", i, ev.RawRef)
		seen[ev.RawRef] = true
		evs = append(evs, ev)
	}

	// The conductor's events are those of its events.jsonl, in order, one
	// for each line.
	var fromConductor []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.RawRef, "file:") {
			fromConductor = append(fromConductor, ev.RawRef)
		}
	}
	var want []string
	for _, off := range lineOffsets(t, events) {
		want = append(want, "file://"+events+"#offset="+strconv.FormatInt(off, 10))
	}
	require.Equal(t, want, fromConductor)

	// The workflow's steps frame them.
	var steps []string
	for _, ev := range evs {
		if ev.AgentID == canonical.WorkflowAgent {
			steps = append(steps, string(ev.State)+" "+string(ev.Type))
		}
	}
	require.Equal(t, []string{"running state_change", "running task_spawn", "running task_update",
		"done task_done", "done task_update"}, steps)
	require.Equal(t, canonical.WorkflowAgent, evs[0].AgentID)
	require.Equal(t, canonical.WorkflowAgent, evs[len(evs)-1].AgentID)

	// The leaked secrets reached the conductor's log, and nowhere in the stream.
	raw, err := os.ReadFile(events)
	require.NoError(t, err)
	require.Contains(t, string(raw), key)
	require.Contains(t, string(raw), password)
	for _, leak := range []string{key, key[len("sk-ant-api03-"):][:20], password} {
		require.NotContains(t, string(stored), leak)
	}
	require.Contains(t, string(stored), "***REDACTED***")

	st, err := r.Status(id)
	require.NoError(t, err)
	require.Equal(t, taskapi.StreamRunID(id), st.Stream)
	require.Zero(t, st.StreamDropped)

	// Reading again from the middle (-since: the bytes printed so far)
	// gives the rest; a person gets one line per event, without colours
	// in a pipe; an offset inside a line is refused.
	half := len(strings.Join(lines[:len(lines)/2], "\n")) + 1
	out, err := starterCmd("events", "-json", "-since", strconv.Itoa(half)).Output()
	require.NoError(t, err)
	require.Equal(t, string(stored[half:]), string(out))

	out, err = starterCmd("events").Output()
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"), len(evs))
	require.NotContains(t, string(out), "\x1b[")
	require.Contains(t, string(out), "planner/workflow")

	out, err = starterCmd("events", "-since", "3").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "inside a line")
}

// lockedBuffer is a buffer a command writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func countLines(t *testing.T, path string) int {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return bytes.Count(data, []byte("\n"))
}

// lineOffsets are where the complete, non-blank lines of a file start.
func lineOffsets(t *testing.T, path string) []int64 {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []int64
	var off int64
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		if bytes.HasSuffix(l, []byte("\n")) && len(bytes.TrimSpace(l)) > 0 {
			out = append(out, off)
		}
		off += int64(len(l))
	}
	return out
}

// waitUntil polls cond every 10 ms; the two-minute deadline only keeps a
// hung test from hanging the suite.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s never happened", what)
		case <-tick.C:
		}
	}
}
