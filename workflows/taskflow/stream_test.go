package taskflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/internal/eventstream"
	"karvi-edda-temporal/mapping"
)

var updateStreams = flag.Bool("update", false, "rewrite testdata/streams from the code")

// streamFake stores what the mocked activities' requests carry for the
// task's stream, through the real store and the real conductor mapping.
type streamFake struct {
	t     *testing.T
	store *eventstream.Store
}

func newStreamFake(t *testing.T) *streamFake {
	s, err := eventstream.Open(t.TempDir())
	require.NoError(t, err)
	return &streamFake{t: t, store: s}
}

// steps stores a request's steps and says what it stored.
func (s *streamFake) steps(info *taskact.StreamInfo) activities.StreamCounts {
	if s == nil || info == nil {
		return activities.StreamCounts{}
	}
	res, err := s.store.Append(info.RunID, info.Steps)
	require.NoError(s.t, err)
	return activities.StreamCounts{Appended: res.Appended, Skipped: res.Skipped}
}

// conductor stores a delivery's conductor events and adds what it stored
// to counts. The fake's attempts share one events path; each real one has
// its own, so the plan name stands in for it.
func (s *streamFake) conductor(req taskact.DeliverRequest, evs []mapping.Event, counts activities.StreamCounts) activities.StreamCounts {
	if s == nil || req.Stream == nil {
		return counts
	}
	plan := req.Plan
	plan.EventsPath = "/work/tasks/T5/.edda/conductor/" + plan.Summary.Name + "/events.jsonl"
	cctx := taskact.ConductorContext(req.TaskID, plan, *req.Stream, nil)
	var out []canonical.Event
	for _, ev := range evs {
		c, _ := canonical.FromConductor(ev, cctx)
		out = append(out, c)
	}
	res, err := s.store.Append(req.Stream.RunID, out)
	require.NoError(s.t, err)
	counts.Appended += res.Appended
	counts.Skipped += res.Skipped
	counts.Warnings += len(res.Warnings)
	return counts
}

// file is the stream of a task as stored.
func (s *streamFake) file(taskID string) []byte {
	path, err := s.store.Path(canonical.RunIDForTask(taskID))
	require.NoError(s.t, err)
	data, err := os.ReadFile(path)
	require.NoError(s.t, err)
	return data
}

// withoutSteps is the stream of a request whose steps were stored already.
func withoutSteps(s *taskact.StreamInfo) *taskact.StreamInfo {
	if s == nil {
		return nil
	}
	c := *s
	c.Steps = nil
	return &c
}

// lines splits a stream into its events, each one checked to validate as
// stored, to come back unchanged from validation, and to follow the
// transition table from the agent's last state (no warning replayed).
func streamEvents(t *testing.T, data []byte) []canonical.Event {
	t.Helper()
	var out []canonical.Event
	var replay canonical.Stream
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		ev, err := canonical.Parse(line)
		require.NoError(t, err, "line %d", i)
		_, warns, err := replay.Validate(ev)
		require.NoError(t, err, "line %d: %s", i, line)
		require.Empty(t, warns, "line %d: %s", i, line)
		out = append(out, ev)
	}
	return out
}

var streamStart = time.Date(2026, 2, 28, 3, 0, 0, 0, time.UTC)

// Examples A and B, run by the workflow, make a fixed stream: the
// workflow's steps around the conductor's events, every event valid. The
// goldens are reviewed by eye (go test -run StreamGolden -update).
func TestStreamGolden(t *testing.T) {
	for _, name := range []string{"A", "B"} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			env.SetStartTime(streamStart)
			f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/"+name+"/events.snake.jsonl"),
				perBatch: 3, streams: newStreamFake(t)}
			if name == "B" {
				data, err := os.ReadFile("../../testdata/examples/B/state.json")
				require.NoError(t, err)
				cs, err := mapping.ParseConductorState(data)
				require.NoError(t, err)
				f.exitAfterAll, f.exitState = true, &cs
			}
			f.register(env)
			env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
			require.NoError(t, env.GetWorkflowError())
			var st taskapi.Status
			v, err := env.QueryWorkflow(taskapi.QueryStatus)
			require.NoError(t, err)
			require.NoError(t, v.Get(&st))

			got := f.streams.file("T5")
			evs := streamEvents(t, got)
			// Example B's last attempt fails the test phase for good: the
			// store puts the error the table asks for before failed.
			bridges := map[string]int{"A": 0, "B": 1}[name]
			require.Len(t, evs, len(f.events)+5+bridges, "the conductor's events, five steps and the bridges")
			require.Equal(t, "run-T5", st.Stream)
			require.GreaterOrEqual(t, st.StreamEvents, len(f.events), "the deliveries count what they stored")
			require.Zero(t, st.StreamWarnings)

			path := filepath.Join("testdata", "streams", name+".jsonl")
			if *updateStreams {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "%s differs (run with -update and review)", path)
		})
	}
}

// What the stream says of a task's life: a signal, how the attempt ended,
// a later attempt's agents; one event per step and per conductor event,
// with raw_refs that never repeat.
func TestStreamTellsAbortAndRedispatch(t *testing.T) {
	t.Run("abort", func(t *testing.T) {
		env := newEnv(t)
		f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl")[:2], streams: newStreamFake(t)}
		f.register(env)
		env.RegisterDelayedCallback(func() {
			f.mu.Lock()
			f.hang = true
			f.mu.Unlock()
		}, time.Second)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalAbort, taskapi.AbortSignal{Reason: "wrong branch"}) }, 10*time.Second)
		env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
		require.NoError(t, env.GetWorkflowError())
		require.Equal(t, []string{
			"workflow running state_change", "workflow running task_spawn", "workflow running task_update",
			"conductor running state_change", "workflow running message",
			// What the conductor wrote before it was stopped comes after the
			// signal that stopped it: the stop drains the log.
			"implement running state_change", "workflow blocked task_done", "workflow blocked task_update",
		}, summarize(streamEvents(t, f.streams.file("T5"))))
		last := streamEvents(t, f.streams.file("T5"))
		require.JSONEq(t, `{"message":"abort requested: wrong branch","signal":"abort","reason":"wrong branch"}`, string(last[4].Payload))
		require.JSONEq(t, `{"result":"cancelled","summary":"Plan aborted by user","status":"blocked"}`, string(last[6].Payload))
	})
	t.Run("redispatch", func(t *testing.T) {
		env := newEnv(t)
		f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1, streams: newStreamFake(t)}
		f.register(env)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(taskapi.SignalRedispatch, taskapi.RedispatchSignal{}) }, 1500*time.Millisecond)
		env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
		require.NoError(t, env.GetWorkflowError())
		evs := streamEvents(t, f.streams.file("T5"))
		seen := map[string]bool{}
		var agents []string
		for _, ev := range evs {
			require.False(t, seen[ev.RawRef], "raw_ref %s twice", ev.RawRef)
			seen[ev.RawRef] = true
			if ev.Type == canonical.TypeReplan || ev.Type == canonical.TypeTaskSpawn ||
				ev.AgentID != canonical.WorkflowAgent && !strings.HasPrefix(ev.IntentRef, "plan-karvi-t5-020d01-r2") {
				continue
			}
			agents = append(agents, ev.AgentID)
		}
		joined := strings.Join(agents, " ")
		require.Contains(t, joined, "conductor-r2 implement-r2")
		require.True(t, strings.HasSuffix(joined, "docs-r2 conductor-r2 workflow workflow"), "%s: the second attempt ends with its status and its end", joined)
		var replans, ends int
		for _, ev := range evs {
			if ev.Type == canonical.TypeReplan {
				replans++
			}
			if ev.AgentID == canonical.WorkflowAgent && strings.Contains(string(ev.Payload), "ended") {
				ends++
			}
		}
		require.Equal(t, 1, replans, "one redispatch signal")
		require.Equal(t, 2, ends, "two attempts ended")
	})
}

func summarize(evs []canonical.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s %s", ev.AgentID, ev.State, ev.Type))
	}
	return out
}

// A delivery that fails after it stored its events is retried from the
// checkpoint; the stream holds each event once.
func TestStreamSurvivesARetriedDelivery(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 2, streams: newStreamFake(t)}
	f.register(env)
	failures := 0
	f.afterDeliver = func() error {
		if failures < 2 {
			failures++
			return errors.New("worker lost after storing")
		}
		return nil
	}
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 2, failures)
	evs := streamEvents(t, f.streams.file("T5"))
	require.Len(t, evs, len(f.events)+5)
}

// The stream's state crosses continue-as-new: the steps of the continued
// run follow on without repeating a sequence number.
func TestStreamCrossesContinueAsNew(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 1, streams: newStreamFake(t)}
	f.register(env)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t), Tuning: &taskapi.Tuning{ContinueAsNewAfterPolls: 3}})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can))
	var next taskapi.TaskInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	var resumed State
	require.NoError(t, json.Unmarshal(next.Resume, &resumed))
	require.NotNil(t, resumed.Stream)
	require.Equal(t, 3, resumed.Stream.Seq, "task started, attempt started, dispatched")
	resumed.Tuning = nil
	next.Resume, _ = json.Marshal(resumed)
	runToEnd(t, f, next)
	evs := streamEvents(t, f.streams.file("T5"))
	require.Len(t, evs, len(f.events)+5)
	require.True(t, strings.HasSuffix(evs[len(evs)-1].RawRef, "#seq=5"), evs[len(evs)-1].RawRef)
}

// A step's free text is redacted when the workflow makes it: steps travel
// in activities' inputs, which history keeps.
func TestStepsAreRedactedBeforeTheyTravel(t *testing.T) {
	env := newEnv(t)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 8}
	f.register(env)
	secret := "sk-ant-api03-" + strings.Repeat("Qw3rTy", 8)
	var carried []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != "StartAttempt" {
			return
		}
		var req taskact.StartAttemptRequest
		require.NoError(t, args.Get(&req))
		for _, ev := range req.Stream.Steps {
			carried = append(carried, string(ev.Payload))
		}
	})
	d := exampleDispatch(t)
	d.Message = "Use key " + secret + " to add auth.\nMore."
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: d})
	require.NoError(t, env.GetWorkflowError())
	require.NotEmpty(t, carried)
	joined := strings.Join(carried, "\n")
	require.NotContains(t, joined, secret[:24])
	require.Contains(t, joined, "Use key ***REDACTED*** to add auth.")
}

// Steps handed to an activity that then fails for good (its host lost)
// are not lost: they stay pending and the next activity stores them, so
// the workflow's steps in the stream run 1, 2, 3, ... without a gap.
func TestStreamKeepsTheStepsOfAFailedActivity(t *testing.T) {
	env := newEnv(t)
	q := watchQueues(env)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 2,
		hostOf: func(n int) string { return map[int]string{1: "h2", 2: "h1"}[n] }, streams: newStreamFake(t)}
	f.gone = lostHost(func() string { return q.shared }, "h2")
	f.register(env)
	// A signal in the middle of the failing delivery (a second of the
	// fake's time): its step travels in the stop sent to the lost host.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: "try elsewhere"})
	}, 500*time.Millisecond)
	env.ExecuteWorkflow(taskapi.TaskWorkflowName, taskapi.TaskInput{Dispatch: exampleDispatch(t)})
	require.NoError(t, env.GetWorkflowError())
	var seqs []int
	for _, ev := range streamEvents(t, f.streams.file("T5")) {
		if i := strings.LastIndex(ev.RawRef, "#seq="); i >= 0 {
			n, err := strconv.Atoi(ev.RawRef[i+len("#seq="):])
			require.NoError(t, err)
			seqs = append(seqs, n)
		}
	}
	require.NotEmpty(t, seqs)
	for i, n := range seqs {
		require.Equal(t, i+1, n, "the workflow's steps as stored: %v", seqs)
	}
}
