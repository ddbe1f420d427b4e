package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// Stages splits event-to-PATCH latency at the points the workflow history
// timestamps: the event is written, the TailEvents activity that carries it
// completes (the server records it), the workflow task that applies it
// starts on the worker, and karvi receives the PATCH.
type Stages struct {
	// Tail: write to activity completion recorded (inotify wake, linger,
	// the completion RPC). Includes waiting for the next poll when the
	// event was written while none was running.
	Tail Summary `json:"tail"`
	// Dispatch: completion recorded to workflow task started.
	Dispatch Summary `json:"dispatch"`
	// Patch: workflow task started to PATCH received (replay, reduce, the
	// local activity's HTTP request).
	Patch Summary `json:"patch"`
	// BetweenPolls counts events written while no poll was running.
	BetweenPolls int `json:"betweenPolls"`
	Events       int `json:"events"`
}

type tailEvents struct {
	Events []struct {
		TS string `json:"ts"`
	} `json:"events"`
}

// StageSamples are the raw durations behind Stages, to pool over tasks.
type StageSamples struct {
	Tail, Dispatch, Patch []time.Duration
	BetweenPolls, Events  int
}

// Add pools o into s.
func (s *StageSamples) Add(o StageSamples) {
	s.Tail = append(s.Tail, o.Tail...)
	s.Dispatch = append(s.Dispatch, o.Dispatch...)
	s.Patch = append(s.Patch, o.Patch...)
	s.BetweenPolls += o.BetweenPolls
	s.Events += o.Events
}

// Stages summarises the samples.
func (s StageSamples) Stages() Stages {
	return Stages{Tail: Summarize(s.Tail), Dispatch: Summarize(s.Dispatch), Patch: Summarize(s.Patch),
		BetweenPolls: s.BetweenPolls, Events: s.Events}
}

// Breakdown reads one workflow's history (every run of its chain) and
// places each matched sample in it.
func Breakdown(ctx context.Context, c client.Client, workflowID, runID string, samples []Sample) (StageSamples, error) {
	var evs []*historypb.HistoryEvent
	for runID != "" {
		it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return StageSamples{}, fmt.Errorf("history of %s: %w", workflowID, err)
			}
			evs = append(evs, ev)
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		runID = next
	}
	received := map[string]Sample{}
	for _, s := range samples {
		received[s.TS] = s
	}
	dc := converter.GetDefaultDataConverter()
	started := map[int64]time.Time{}
	var st StageSamples
	for i, ev := range evs {
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			started[a.GetScheduledEventId()] = ev.GetEventTime().AsTime()
		}
		a := ev.GetActivityTaskCompletedEventAttributes()
		if a == nil {
			continue
		}
		var res tailEvents
		if err := dc.FromPayloads(a.GetResult(), &res); err != nil || len(res.Events) == 0 {
			continue
		}
		done := ev.GetEventTime().AsTime()
		var wftStart time.Time
		for _, later := range evs[i+1:] {
			if later.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED {
				wftStart = later.GetEventTime().AsTime()
				break
			}
		}
		pollStart := started[a.GetScheduledEventId()]
		for _, e := range res.Events {
			s, ok := received[e.TS]
			if !ok {
				continue
			}
			st.Events++
			if !pollStart.IsZero() && s.At.Before(pollStart) {
				st.BetweenPolls++
			}
			st.Tail = append(st.Tail, done.Sub(s.At))
			if !wftStart.IsZero() {
				st.Dispatch = append(st.Dispatch, wftStart.Sub(done))
				st.Patch = append(st.Patch, s.At.Add(s.Latency).Sub(wftStart))
			}
		}
	}
	return st, nil
}

// Trace writes one line per history event and per matched PATCH, in time
// order, relative to the first: a readable account of where a task's
// latency went.
func Trace(ctx context.Context, c client.Client, workflowID, runID string, samples []Sample) ([]string, error) {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for runID != "" {
		it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("history of %s: %w", workflowID, err)
			}
			text := fmt.Sprintf("history %3d %s", ev.GetEventId(), ev.GetEventType())
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				text += " " + a.GetActivityType().GetName()
			}
			lines = append(lines, line{ev.GetEventTime().AsTime(), text})
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		runID = next
	}
	for _, s := range samples {
		lines = append(lines, line{s.At, "event written " + s.Type + " " + s.TS})
		lines = append(lines, line{s.At.Add(s.Latency), fmt.Sprintf("PATCH received %s %s (%.1f ms)", s.Type, s.TS, float64(s.Latency)/1e6)})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	var out []string
	for _, l := range lines {
		out = append(out, fmt.Sprintf("%9.3f ms  %s", float64(l.at.Sub(lines[0].at))/1e6, l.text))
	}
	return out, nil
}
