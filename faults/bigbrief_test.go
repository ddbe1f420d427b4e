//go:build realserver

package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/testrig"
)

// bigEvents is how many big events the conductor writes: 1,000 by
// default (about 40 s here, each PATCH carrying a 500-entry log), or
// FAULTS_BIG_EVENTS.
func bigEvents(t *testing.T) int {
	n := 1000
	if s := os.Getenv("FAULTS_BIG_EVENTS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "FAULTS_BIG_EVENTS")
	}
	return n
}

// A conductor that writes thousands of events with 10 KB error texts in one
// attempt. Every delivery carries the brief in its input and its result,
// and the server ends a workflow whose payload passes 2 MB: the brief must
// stay bounded whatever the events say, and the task end normally.
func TestLongLogOfBigErrorsKeepsHistoryPayloadsSmall(t *testing.T) {
	began := time.Now()
	defer func() { t.Logf("took %s", time.Since(began).Round(time.Second)) }()
	f := newFakeEdda(t)
	r := newRig(t, f.options(testrig.Options{}))
	const id = "BIG1"
	r.Workspace(id)
	big := strings.Repeat("the reviewer explains at length ", 10<<10/32)
	var chunks [][]byte
	var b bytes.Buffer
	seq := 0
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, `{"seq":%d,"ts":"%s",`, seq, ts(seq%60))
		fmt.Fprintf(&b, format, args...)
		b.WriteString("}\n")
		seq++
	}
	line(`"type":"plan_start","plan_name":"x","phase_count":3`)
	line(`"type":"phase_start","phase_id":"implement","attempt":1`)
	for i, n := 0, bigEvents(t); i < n; i++ {
		line(`"type":"verdict_received","phase_id":"implement","error":"%d %s"`, i, big)
		if (i+1)%500 == 0 {
			chunks = append(chunks, bytes.Clone(b.Bytes()))
			b.Reset()
		}
	}
	line(`"type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":1000,"cost_usd":0.85`)
	line(`"type":"phase_start","phase_id":"test","attempt":1`)
	line(`"type":"phase_passed","phase_id":"test","attempt":1,"duration_ms":1000,"cost_usd":0.42`)
	line(`"type":"phase_start","phase_id":"docs","attempt":1`)
	line(`"type":"phase_passed","phase_id":"docs","attempt":1,"duration_ms":1000,"cost_usd":0.18`)
	line(`"type":"plan_completed","phases_passed":3,"total_cost_usd":1.45`)
	chunks = append(chunks, b.Bytes())
	f.script(t, id, fakeRun{chunks: chunks, state: []byte(completedState)})

	run := r.Start(testrig.Dispatch(t, id, "Review at length."))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var res taskapi.Result
	require.NoError(t, run.Get(ctx, &res))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	require.Len(t, res.Brief.Log, 500)

	largest, where := 0, ""
	for _, h := range allRuns(t, r, id) {
		for _, ev := range h.Events {
			var n int
			switch {
			case ev.GetActivityTaskScheduledEventAttributes() != nil:
				n = ev.GetActivityTaskScheduledEventAttributes().GetInput().Size()
			case ev.GetActivityTaskCompletedEventAttributes() != nil:
				n = ev.GetActivityTaskCompletedEventAttributes().GetResult().Size()
			case ev.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil:
				n = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetInput().Size()
			}
			if n > largest {
				largest, where = n, ev.GetEventType().String()
			}
		}
	}
	t.Logf("largest payload in history: %d KB (%s)", largest>>10, where)
	require.Less(t, largest, 512<<10, "a payload of %d KB in %s", largest>>10, where)
}

// allRuns is the history of every run of a task's workflow, the latest
// first, following continue-as-new back to the first.
func allRuns(t *testing.T, r *rig, taskID string) []*historypb.History {
	t.Helper()
	var out []*historypb.History
	runID := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		it := r.Client.GetWorkflowHistory(ctx, taskapi.WorkflowID(taskID), runID, false,
			enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		h := &historypb.History{}
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			h.Events = append(h.Events, ev)
		}
		cancel()
		out = append(out, h)
		runID = h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if runID == "" {
			return out
		}
	}
}
