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
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/testrig"
)

// A run of 12 dependent tasks while its only worker is SIGKILLed again and
// again, at seeded moments: every task completes, each in one attempt (a
// kill must not look like a failed attempt and loop the task), and no task
// ever has two conductors.
func TestRunSurvivesRepeatedWorkerKills(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(faultSeed(t), 11))
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=250ms cost=0.05"})
	var tasks []string
	for i := range 12 {
		dep := ""
		if i >= 3 {
			dep = fmt.Sprintf(`,"depends":["kr-%02d"]`, i-3)
		}
		if i == 11 {
			dep = `,"depends":["kr-08","kr-09","kr-10"]`
		}
		tasks = append(tasks, fmt.Sprintf(`{"id":"kr-%02d","title":"T%d"%s}`, i, i, dep))
	}
	runFile := `{"slug":"kr","title":"Killed","concurrency":3,"tasks":[` + strings.Join(tasks, ",") + `]}`
	live := r.SampleConductors()
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile)})

	done := make(chan runstatus.Status, 1)
	go func() { done <- r.RunResult(wr, 6*time.Minute) }()
	kills := 0
	var doc runstatus.Status
loop:
	for {
		select {
		case doc = <-done:
			break loop
		case <-time.After(time.Duration(700+rnd.IntN(1300)) * time.Millisecond):
			if kills == 5 {
				continue
			}
			require.NoError(t, r.KillWorker())
			kills++
			r.StartWorker()
		}
	}
	live.Stop(t)
	require.LessOrEqual(t, live.Most(), 3, "more conductors at once than the run's concurrency")
	t.Logf("%d worker kills during the run", kills)
	require.NotZero(t, kills)
	require.Equal(t, runstatus.RunComplete, doc.Status)
	require.Equal(t, 12, doc.Summary.Successful)
	for id, task := range doc.Tasks {
		require.Equal(t, 1, task.LoopCount, "task %s looped: a kill was taken for a failure", id)
	}
}
