package taskact

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/fleet"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/internal/tailer"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/wait"
)

// A conductor that starts its first phase, finishes it once a gate file
// appears, then writes nothing until it is stopped.
const quietConductor = `#!/bin/sh
dir="$5/.edda/conductor/$(basename "$(dirname "$3")")"
mkdir -p "$dir"
echo '{"seq":0,"ts":"2026-02-28T03:00:01Z","type":"phase_start","phase_id":"implement","attempt":1}' >> "$dir/events.jsonl"
while [ ! -e "$5/gate" ]; do sleep 0.01; done
echo '{"seq":1,"ts":"2026-02-28T03:00:02Z","type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":5,"cost_usd":0.1}' >> "$dir/events.jsonl"
while :; do sleep 1; done
`

func fenceActivities(t *testing.T, host string) (*Activities, *testsuite.TestActivityEnvironment, string) {
	t.Helper()
	root := t.TempDir()
	conductor := filepath.Join(root, "edda")
	require.NoError(t, os.WriteFile(conductor, []byte(quietConductor), 0o755))
	files, err := sink.NewFile(filepath.Join(root, "sink"))
	require.NoError(t, err)
	a := &Activities{Config: activities.Config{WorkRoot: filepath.Join(root, "work"), Conductor: conductor,
		StopGrace: time.Second, Host: host}, Sink: files}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	t.Cleanup(func() {
		runs, _ := a.LiveRuns("")
		for _, r := range runs {
			_ = a.StopRun(t.Context(), r, mapping.RuntimeStop{})
		}
	})
	return a, env, root
}

func startAttempt(t *testing.T, env *testsuite.TestActivityEnvironment, a *Activities, n int) StartAttemptResult {
	t.Helper()
	v, err := env.ExecuteActivity(a.StartAttempt, StartAttemptRequest{Dispatch: exampleDispatch(t), Attempt: n,
		MaxWait: 10 * time.Millisecond, CheckpointEvery: 10 * time.Millisecond})
	require.NoError(t, err)
	var res StartAttemptResult
	require.NoError(t, v.Get(&res))
	require.NotNil(t, res.Conductor, res.StartError)
	return res
}

// A started attempt names its host, and starting a task's attempt stops
// the live conductor of an attempt given up on this host, and only that:
// the same attempt started again re-attaches.
func TestStartAttemptStopsTheAttemptsGivenUpHere(t *testing.T) {
	a, env, _ := fenceActivities(t, "h1")
	first := startAttempt(t, env, a, 1)
	require.Equal(t, "h1", first.Host)
	again := startAttempt(t, env, a, 1)
	require.Equal(t, *first.Conductor, *again.Conductor, "the same attempt re-attaches")

	live, err := a.LiveRuns("T5")
	require.NoError(t, err)
	require.Equal(t, []LiveRun{{TaskID: "T5", Plan: mapping.PlanName("T5", 1), Dir: first.Plan.RunDir, Handle: *first.Conductor}}, live)

	second := startAttempt(t, env, a, 2)
	st, err := proc.Inspect(first.Conductor.proc())
	require.NoError(t, err)
	require.False(t, st.Alive || st.GroupAlive, "attempt 1's conductor was stopped")
	live, err = a.LiveRuns("")
	require.NoError(t, err)
	require.Equal(t, []LiveRun{{TaskID: "T5", Plan: mapping.PlanName("T5", 2), Dir: second.Plan.RunDir, Handle: *second.Conductor}}, live)
}

// A worker asked to stop hands its deliveries back at once, with what
// they delivered, instead of holding them to the end of their wait.
func TestDeliveryHandsBackWhenTheWorkerStops(t *testing.T) {
	a, env, root := fenceActivities(t, "h1")
	res := startAttempt(t, env, a, 1)
	require.NotNil(t, res.Delivery)
	// A delivery checkpoints at a phase start: the one under test must
	// begin past it, or it hands back at that boundary, not at the stop.
	// The start's own delivery may have ended before the conductor wrote
	// its phase_start; a first delivery then takes it.
	cp := res.Delivery
	for cp.Next.Offset == 0 {
		v, err := env.ExecuteActivity(a.DeliverEvents, DeliverRequest{TaskID: "T5", Plan: res.Plan,
			Handle: *res.Conductor, Brief: cp.Brief, Cursor: cp.Next, TaskStatus: mapping.TaskInProgress,
			MaxWait: 100 * time.Millisecond, CheckpointEvery: 100 * time.Millisecond})
		require.NoError(t, err)
		var d DeliverResult
		require.NoError(t, v.Get(&d))
		cp = &d
	}
	stop := make(chan struct{})
	env.SetWorkerStopChannel(stop)
	done := make(chan DeliverResult, 1)
	errc := make(chan error, 1)
	go func() {
		v, err := env.ExecuteActivity(a.DeliverEvents, DeliverRequest{TaskID: "T5", Plan: res.Plan,
			Handle: *res.Conductor, Brief: cp.Brief, Cursor: cp.Next, TaskStatus: mapping.TaskInProgress,
			MaxWait: time.Hour, CheckpointEvery: time.Hour})
		if err != nil {
			errc <- err
			return
		}
		var d DeliverResult
		errc <- v.Get(&d)
		done <- d
	}()
	// The delivery takes the conductor's next event to the sink and waits
	// for more; then the worker begins to stop.
	require.NoError(t, os.WriteFile(filepath.Join(res.Plan.Cwd, "gate"), nil, 0o644))
	patches := filepath.Join(root, "sink", "T5", "patches.jsonl")
	// 30 s is a safety net, not a timing test.
	wait.EventuallyEvery(t, 30*time.Second, 10*time.Millisecond, "the delivery to send phase_passed", func() (any, bool) {
		select {
		case err := <-errc:
			t.Fatalf("the delivery ended before the worker stopped: %v %+v", err, <-done)
		default:
		}
		data, _ := os.ReadFile(patches)
		events, _ := os.ReadFile(res.Plan.EventsPath)
		return fmt.Sprintf("patches %d bytes; events.jsonl %q", len(data), events), strings.Contains(string(data), "phase_passed")
	})
	close(stop)
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute): // a safety net: the wait it cuts short is an hour
		t.Fatal("the delivery did not hand back once the worker began to stop")
	}
	d := <-done
	// phase_passed, and the next phase's start when the conductor wrote it
	// before the stop: whatever went to the sink comes back with the
	// checkpoint, and the cursor has moved past it.
	require.GreaterOrEqual(t, d.Events, 1, "what it delivered comes back with the checkpoint")
	require.Greater(t, d.Next.Offset, cp.Next.Offset, "the checkpoint's cursor moved on")
	require.False(t, d.Exited, "the conductor runs on")
	st, err := proc.Inspect(res.Conductor.proc())
	require.NoError(t, err)
	require.True(t, st.Alive, "a stopping worker leaves its conductors running")
}

// An attempt started again once its conductor has written events (the
// retry of a StartAttempt whose worker died after the conductor started)
// resumes: it neither takes the task's status back to dispatched (karvi
// may say in_progress already, and would dispatch it anew) nor sends the
// skeleton over the brief that already shows those events.
func TestStartAttemptAgainAfterTheConductorStartedResumes(t *testing.T) {
	a, env, _ := fenceActivities(t, "h1")
	first := startAttempt(t, env, a, 1)
	require.Eventually(t, func() bool {
		fi, err := os.Stat(first.Plan.EventsPath)
		return err == nil && fi.Size() > 0
	}, 10*time.Second, 10*time.Millisecond, "the conductor's first event")
	// Delivery got the event to the sink, and the phase start moved the
	// task on.
	d := &delivery{a: a, explain: func(_ string, _ *int, m string) string { return m },
		brief: mapping.NewBriefState("T5", first.Plan.Summary),
		req:   DeliverRequest{TaskID: "T5", Plan: first.Plan, TaskStatus: mapping.TaskDispatched}}
	batch, err := tailer.ReadFrom(first.Plan.EventsPath, tailer.Cursor{}, maxBatchBytes)
	require.NoError(t, err)
	require.NoError(t, d.take(t.Context(), batch))
	st, err := a.Sink.(*sink.File).Status("T5")
	require.NoError(t, err)
	require.Equal(t, "in_progress", st.Status)
	held, err := a.Sink.(*sink.File).CurrentBrief(t.Context(), "T5")
	require.NoError(t, err)
	require.Len(t, held["log"], 1)

	files := a.Sink.(*sink.File)
	writes := &countingSink{Sink: files}
	a.Sink = writes
	again := startAttempt(t, env, a, 1)
	require.Equal(t, *first.Conductor, *again.Conductor, "the same conductor")
	require.Zero(t, writes.patches, "no brief write: the sink holds the skeleton and the event")
	st, err = files.Status("T5")
	require.NoError(t, err)
	require.Equal(t, "in_progress", st.Status)
	for _, e := range st.History[1:] {
		require.NotEqual(t, "dispatched", e.Status, "status taken back: %+v", st.History)
	}
}

// countingSink counts the brief writes that go through it.
type countingSink struct {
	sink.Sink
	patches int
}

func (c *countingSink) PatchBrief(ctx context.Context, taskID string, body json.RawMessage) error {
	c.patches++
	return c.Sink.PatchBrief(ctx, taskID, body)
}

// resumeAfterStop stops an attempt's conductor, as a pause does, and
// resumes its plan in a run directory of its own.
func resumeAfterStop(t *testing.T, env *testsuite.TestActivityEnvironment, a *Activities, started StartAttemptResult) ConductorHandle {
	t.Helper()
	_, err := env.ExecuteActivity(a.InterruptConductor, InterruptRequest{Plan: started.Plan, Handle: *started.Conductor})
	require.NoError(t, err)
	v, err := env.ExecuteActivity(a.ResumeConductor, ResumeRequest{Plan: started.Plan, Resume: 1})
	require.NoError(t, err)
	var res ResumeResult
	require.NoError(t, v.Get(&res))
	require.NotNil(t, res.Conductor, res.StartError)
	return *res.Conductor
}

// A conductor resumed after a pause runs in a run directory of its own,
// and is its plan's all the same: the fence keeps it while its plan is
// the task's current attempt here.
func TestFenceKeepsAResumedConductorOfTheCurrentAttempt(t *testing.T) {
	a, env, _ := fenceActivities(t, "h1")
	first := startAttempt(t, env, a, 1)
	resumed := resumeAfterStop(t, env, a, first)

	live, err := a.LiveRuns("")
	require.NoError(t, err)
	require.Len(t, live, 1)
	cur := fleet.Current{Attempt: 1, Plan: first.Plan.Summary.Name, Host: "h1"}
	v, why := fleet.Judge(fleet.Run{TaskID: live[0].TaskID, Plan: live[0].Plan}, cur, "h1")
	require.Equal(t, fleet.Keep, v, why)
	require.Equal(t, first.Plan.Summary.Name, live[0].Plan, "the resumed run is its plan's")
	require.Equal(t, resumed, live[0].Handle)

	// Starting the same attempt again (a retried start) leaves it running.
	startAttempt(t, env, a, 1)
	st, err := proc.Inspect(resumed.proc())
	require.NoError(t, err)
	require.True(t, st.Alive, "the resumed conductor of the attempt being started was stopped")
}

// The resumed conductor of an attempt the task's workflow gave up is
// stale like the attempt's own: the fence stops it, and so does the start
// of the next attempt here.
func TestFenceStopsAResumedConductorOfAnAttemptGivenUp(t *testing.T) {
	a, env, _ := fenceActivities(t, "h1")
	first := startAttempt(t, env, a, 1)
	resumed := resumeAfterStop(t, env, a, first)

	live, err := a.LiveRuns("T5")
	require.NoError(t, err)
	require.Len(t, live, 1)
	cur := fleet.Current{Attempt: 2, Plan: mapping.PlanName("T5", 2), Host: "h2"}
	v, why := fleet.Judge(fleet.Run{TaskID: live[0].TaskID, Plan: live[0].Plan}, cur, "h1")
	require.Equal(t, fleet.Stop, v, why)

	startAttempt(t, env, a, 2)
	st, err := proc.Inspect(resumed.proc())
	require.NoError(t, err)
	require.False(t, st.Alive || st.GroupAlive, "the resumed conductor of attempt 1 was left running")
}

// A conductor the runtime stopped of its own accord (here the fence of a
// worker that judged it another host's) ends its attempt saying so: the
// delivery that sees it gone reports the stop, the outcome names the
// fence and its reason, and the brief's log says it too.
func TestAConductorTheFenceStoppedEndsSayingSo(t *testing.T) {
	a, env, _ := fenceActivities(t, "h1")
	first := startAttempt(t, env, a, 1)
	wait.EventuallyEvery(t, 30*time.Second, 10*time.Millisecond, "the conductor's first event", func() (any, bool) {
		fi, err := os.Stat(first.Plan.EventsPath)
		return err, err == nil && fi.Size() > 0
	})
	live, err := a.LiveRuns("T5")
	require.NoError(t, err)
	require.Len(t, live, 1)
	stop := mapping.RuntimeStop{By: mapping.StopBySweep, Host: "h2", Why: "the task's workflow runs this attempt on host h1"}
	require.NoError(t, a.StopRun(t.Context(), live[0], stop))

	// The conductor may have written a phase boundary before the stop
	// took it, and a boundary ends a delivery: deliver on from each
	// result, as the workflow does, until one sees the conductor gone.
	cp := first.Delivery
	brief, cursor, job := cp.Brief, cp.Next, cp.Job
	var d DeliverResult
	for range 20 {
		v, err := env.ExecuteActivity(a.DeliverEvents, DeliverRequest{TaskID: "T5", Plan: first.Plan,
			Handle: *first.Conductor, Brief: brief, Cursor: cursor, Job: job, TaskStatus: mapping.TaskInProgress,
			MaxWait: time.Minute, CheckpointEvery: time.Minute})
		require.NoError(t, err)
		d = DeliverResult{}
		require.NoError(t, v.Get(&d))
		if d.Exited {
			break
		}
		brief, cursor, job = d.Brief, d.Next, d.Job
	}
	require.True(t, d.Exited, "the delivery saw the conductor gone")
	require.NotNil(t, d.Stopped, "the delivery reports the fence's stop")
	require.Equal(t, "h2", d.Stopped.Host)
	o := mapping.ExitOutcome(d.Exit(), d.Brief, first.Plan.Summary)
	want := "The worker's fence on host h2 stopped the conductor while phase implement was running: " +
		"the task's workflow runs this attempt on host h1"
	require.Equal(t, want, o.BlockerReason)
	require.Equal(t, want, o.LastError)
	require.Equal(t, mapping.ErrFenced, o.ErrorType)

	held, err := a.Sink.(*sink.File).CurrentBrief(t.Context(), "T5")
	require.NoError(t, err)
	log, err := json.Marshal(held["log"])
	require.NoError(t, err)
	require.Contains(t, string(log), "the worker's fence on host h2 stopped the conductor of "+first.Plan.Summary.Name+
		": the task's workflow runs this attempt on host h1")
}
