package runflow

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/workflows/runflow/runapi"
)

// bigRunFile is a run file of n tasks shaped as the run benchmark's: levels
// of width tasks, each waiting for two of the level before.
func bigRunFile(n, width int) []byte {
	var tasks []string
	for i := range n {
		deps := ""
		if lvl := i / width; lvl > 0 {
			prev := (lvl - 1) * width
			deps = fmt.Sprintf(`,"depends":["big-t%05d","big-t%05d"]`, prev+i%width, prev+(i+1)%width)
		}
		tasks = append(tasks, fmt.Sprintf(`{"id":"big-t%05d","title":"Task %d","description":"[sim checks=pass delay=100ms cost=0.01]","skill":"single"%s}`, i, i, deps))
	}
	return fmt.Appendf(nil, `{"slug":"big-run","title":"Big run","concurrency":1000,"tasks":[%s]}`, strings.Join(tasks, ","))
}

// TestHandoverOfAHugeRunStaysFarBelowTheBlobLimit: a run of 10,000 tasks,
// every one of them done, hands over to its next run an input far below
// Temporal's 2 MB payload limit, and the next run reads it back whole.
func TestHandoverOfAHugeRunStaysFarBelowTheBlobLimit(t *testing.T) {
	data := bigRunFile(10000, 500)
	run, err := runplan.Parse(data)
	require.NoError(t, err)
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	st := runState{Doc: runstatus.New(run, at), Tasks: map[string]*runTask{}}
	require.NoError(t, st.Doc.Start(at))
	for i, rt := range run.Tasks {
		require.NoError(t, st.Doc.TaskStarted(rt.ID, st.Doc.Tasks[rt.ID].Model, at.Add(time.Duration(i)*time.Millisecond)))
		require.NoError(t, st.Doc.Looped(rt.ID))
		require.NoError(t, st.Doc.TaskEnded(rt.ID, runstatus.Done, 0, at.Add(time.Duration(i+100)*time.Millisecond)))
		st.Tasks[rt.ID] = &runTask{Attempt: 1, CostUSD: 0.01, Summary: "Done: " + strings.Repeat("s", 200)}
	}
	r := &runFlow{in: runapi.RunInput{Run: data}, run: run, st: st}
	next, err := r.handover()
	require.NoError(t, err)
	payload, err := json.Marshal(next)
	require.NoError(t, err)
	t.Logf("run file %d bytes, handover %d bytes", len(data), len(payload))
	require.Less(t, len(payload), 1<<20, "a 10,000-task run's continue-as-new input must stay far below Temporal's 2 MB blob limit")

	got, err := resumeInput(next)
	require.NoError(t, err)
	require.Equal(t, run.Slug, got.run.Slug)
	require.Len(t, got.st.Doc.Tasks, 10000)
	require.Equal(t, runstatus.TaskDone, got.st.Doc.Tasks["big-t09999"].Status)
	require.Equal(t, 1, got.st.Tasks["big-t09999"].Attempt)
}
