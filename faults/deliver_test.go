//go:build realserver

package faults

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/testkit/karvifake"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// The tail delivers each event's PATCH as soon as it reads the line, and
// tells the workflow at checkpoints, a phase apart. Here the worker is
// SIGKILLed right after a PATCH reached the sink, many times, so nearly
// every kill lands between a PATCH and its checkpoint: the retried delivery
// starts from the last checkpoint and must skip what the sink already has.
// The sink's brief is sampled every 10 ms meanwhile: its log never gets
// shorter and never shows an entry twice, and the final brief is exactly
// what the conductor's events make of it. Both sinks: karvifake and files.
func TestWorkerKilledBetweenPatchAndCheckpoint(t *testing.T) {
	for _, sink := range []string{"karvi", "file"} {
		t.Run(sink, func(t *testing.T) { killBetweenPatchAndCheckpoint(t, sink) })
	}
}

func killBetweenPatchAndCheckpoint(t *testing.T, sink string) {
	seed := faultSeed(t)
	rnd := rand.New(rand.NewPCG(seed, 0x64656c76))
	// karvi's rate limit off on both sides: this test aims each kill just
	// after one event's PATCH, and a congested worker merges them.
	r := newRig(t, testrig.Options{Sink: sink, KarviRateLimit: karvifake.RateLimitOff,
		WorkerArgs: []string{"-karvi-rate-limit", "off"}})
	ids := []string{"DLV1", "DLV2"}
	// About 130 events per task over 36 s, a PATCH every ~300 ms, with the
	// workflow's checkpoints only at the phase boundaries, 12 s apart.
	// Each kill stalls delivery for the tail's heartbeat timeout (5 s in
	// the test rig) before the retry resumes it, so the plans must outlast
	// the kills.
	msg := "Chatty agent. [sim checks=pass] [sim phase=implement events=40 delay=12s] " +
		"[sim phase=test events=40 delay=12s] [sim phase=docs events=40 delay=12s]"
	runs := map[string]client.WorkflowRun{}
	for _, id := range ids {
		r.Workspace(id)
		if sink == "karvi" {
			r.AddKarviTask(id)
		}
	}
	watch := r.WatchSinkLogs(ids...)
	for _, id := range ids {
		runs[id] = r.Start(testrig.Dispatch(t, id, msg))
	}
	logLen := func(id string) int {
		log, _ := r.SinkBrief(id)["log"].([]any)
		return len(log)
	}

	const kills = 5
	budget := time.Now().Add(90 * time.Second) // for all the kills together
	for k := 0; k < kills; k++ {
		id := ids[k%len(ids)]
		// Kill as soon as the sink's log grew: a PATCH just landed, and the
		// workflow has not heard of it.
		before := logLen(id)
		wait.EventuallyEvery(t, time.Until(budget), 2*time.Millisecond, fmt.Sprintf("kill %d: a PATCH reaching the sink for %s", k, id), func() (any, bool) {
			n := logLen(id)
			return fmt.Sprintf("%d log entries, as before", n), n != before
		})
		require.NoError(t, r.KillWorker())
		time.Sleep(time.Duration(rnd.IntN(301)) * time.Millisecond) // the conductors write on, no worker runs
		r.StartWorker()
	}
	for _, id := range ids {
		res := r.Result(runs[id])
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, id)
		plan := r.PlanName(id, 1)
		var got map[string]any
		if sink == "karvi" {
			got = r.KarviBrief(id)
		} else {
			got = testrig.Normalize(testrig.DropNulls(r.FileBrief(id))).(map[string]any)
		}
		require.Equal(t, r.reducedBrief(id, plan), got, "%s: the sink's brief is what the events make", id)
		logPerEvent(t, got, r.singleRun(id, plan))
		st, err := r.Status(id)
		require.NoError(t, err)
		require.Positive(t, st.EventsApplied)
	}
	samples, grew := watch.Stop(t)
	t.Logf("%s sink: %d kills right after a PATCH; %d brief samples, %d saw the log grow; never shorter, never doubled",
		sink, kills, samples, grew)
	r.AssertNoOrphans()
	require.GreaterOrEqual(t, grew, 20, fmt.Sprintf("too few samples saw delivery progress (%d)", grew))
	// The kills landed where they were aimed: retried deliveries found
	// patches in the sink that the workflow had not recorded, and skipped
	// them.
	resumed, skipped := 0, 0
	for _, id := range ids {
		for _, ev := range r.History(id).GetEvents() {
			a := ev.GetActivityTaskCompletedEventAttributes()
			if a == nil {
				continue
			}
			// DeliverEvents' result, or StartAttempt's with its first delivery.
			var res struct {
				taskact.DeliverResult
				Delivery *taskact.DeliverResult `json:"delivery"`
			}
			if converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &res) != nil {
				continue
			}
			if res.Delivery != nil {
				res.DeliverResult = *res.Delivery
			}
			if res.Resumed > 0 {
				resumed++
				skipped += res.Resumed
			}
		}
	}
	t.Logf("%d deliveries resumed past their checkpoint, skipping %d patches the sink had", resumed, skipped)
	// A delivery killed again and again records only its last attempt's
	// result, so this counts deliveries, not kills.
	require.Positive(t, resumed, "no kill landed between a PATCH and its checkpoint")
}

// The test rig's workers give a killed worker's deliveries to the next one
// within 5 s; a worker at its defaults waits its whole -tail-heartbeat (a
// minute), the price of a running task costing the server one heartbeat a
// minute. Here a default worker is SIGKILLed mid-phase and replaced at
// once: the delivery it held resumes on the new worker once the server
// times the old one's heartbeat out, and the brief is exactly what the
// conductor's events make, each entry once.
func TestKilledDefaultWorkerResumesAfterItsHeartbeatTimeout(t *testing.T) {
	r := newRig(t, testrig.Options{Sink: "karvi", WorkerArgs: []string{"-tail-heartbeat", "1m"}})
	const id = "DLVHB"
	r.Workspace(id)
	r.AddKarviTask(id)
	msg := "Slow agent. [sim checks=pass] [sim phase=implement events=4 delay=5s] " +
		"[sim phase=test events=20 delay=70s] [sim phase=docs events=4 delay=5s]"
	run := r.Start(testrig.Dispatch(t, id, msg))
	logLen := func() int {
		log, _ := r.SinkBrief(id)["log"].([]any)
		return len(log)
	}
	// Into the long test phase: the plan's start, the first phase's 7
	// entries, the test phase's start and a progress event delivered, so
	// the kill lands between two checkpoints.
	wait.Eventually(t, time.Minute, "the test phase under way in karvi", func() (any, bool) {
		n := logLen()
		return fmt.Sprintf("%d log entries", n), n >= 9
	})
	require.NoError(t, r.KillWorker())
	r.StartWorker()

	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	plan := r.PlanName(id, 1)
	require.Equal(t, r.reducedBrief(id, plan), r.KarviBrief(id), "the sink's brief is what the events make")
	logPerEvent(t, r.KarviBrief(id), r.singleRun(id, plan))
	// The delivery the dead worker held was retried after the server timed
	// out its heartbeat: scheduled with the worker's minute, not the
	// start's 5 s.
	timedOut, minute := false, 0
	for _, ev := range r.History(id).GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "DeliverEvents" &&
			a.GetHeartbeatTimeout().AsDuration() == time.Minute {
			minute++
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 &&
			strings.Contains(strings.ToLower(a.GetLastFailure().GetMessage()), "heartbeat") {
			timedOut = true
		}
	}
	require.True(t, timedOut, "no delivery was retried after a heartbeat timeout")
	require.Positive(t, minute, "no delivery was scheduled with the worker's heartbeat timeout")
	r.AssertNoOrphans()
}
