//go:build realserver

package faults

import (
	"fmt"
	"math/rand/v2"
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
// tells the workflow at checkpoints, seconds apart. Here the worker is
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
	// workflow's checkpoints every 5 s. Each kill stalls delivery for the
	// tail's heartbeat timeout (5 s) before the retry resumes it, so the
	// plans must outlast the kills.
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
