//go:build realserver

package faults

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/testrig"
)

// A run of 10 tasks against a pool of 2 while its only worker, which also
// runs the pool's workflow, is SIGKILLed again and again at seeded moments:
// never more than 2 conductors at once, every task completes in one
// attempt, and at the end nobody holds or waits for a slot. Every slot was
// given back by its own task: a worker's death is not a closed workflow, so
// the pool takes nothing back.
func TestSlotsSurviveRepeatedWorkerKills(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(faultSeed(t), 12))
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=250ms cost=0.05"})
	pool := r.PoolName("kills")
	r.SetPool(pool, slotapi.SetRequest{MaxConcurrent: 2, CheckEvery: time.Second})
	var tasks []string
	for i := range 10 {
		tasks = append(tasks, fmt.Sprintf(`{"id":"sk-%02d","title":"T%d"}`, i, i))
	}
	runFile := `{"slug":"sk","title":"Slots and kills","concurrency":10,"tasks":[` + strings.Join(tasks, ",") + `]}`
	live := r.SampleConductors()
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile), Pool: pool})

	done := make(chan runstatus.Status, 1)
	go func() { done <- r.RunResult(wr, 6*time.Minute) }()
	kills := 0
	var doc runstatus.Status
loop:
	for {
		select {
		case doc = <-done:
			break loop
		case <-time.After(time.Duration(600+rnd.IntN(1200)) * time.Millisecond):
			if kills == 5 {
				continue
			}
			require.NoError(t, r.KillWorker())
			kills++
			r.StartWorker()
		}
	}
	t.Logf("%d worker kills during the run", kills)
	require.NotZero(t, kills)
	live.Stop(t)
	require.LessOrEqual(t, live.Most(), 2, "more conductors at once than the pool allows")
	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Equal(t, 10, doc.Summary.Successful)
	for id, task := range doc.Tasks {
		require.Equal(t, 1, task.LoopCount, "task %s looped: a kill was taken for a failure", id)
	}
	v := r.WaitPool(pool, "every slot released", func(v slotapi.View) bool { return len(v.Holders) == 0 })
	require.Empty(t, v.Waiters)
	require.Equal(t, 10, v.Stats.Granted)
	require.Equal(t, 10, v.Stats.Released)
	require.Zero(t, v.Dropped, "no slot had to be taken back")
	r.AssertNoOrphans()
}
