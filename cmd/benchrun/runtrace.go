package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/runplan"
)

// HandoffStages splits the run hand-off (a dependency's plan_completed to
// the dependent's plan_start) at the points the histories stamp, for the
// last dependency of each dependent task.
type HandoffStages struct {
	// SeesEnd: plan_completed to the dependency's delivering activity
	// completing (the server records it).
	SeesEnd bench.Summary `json:"seesEnd"`
	// Bookkeeping: that completion to the dependency's workflow closing
	// (settle patch, final status, slot release, search attributes).
	Bookkeeping bench.Summary `json:"bookkeeping"`
	// ToParent: the dependency's end to the run workflow learning of it
	// (ChildWorkflowExecutionCompleted, or the end signal).
	ToParent bench.Summary `json:"toParent"`
	// ParentTask: that to the dependent's StartChildWorkflowExecution
	// being initiated (the run's workflow task, status.json included).
	ParentTask bench.Summary `json:"parentTask"`
	// ChildStart: initiated to the dependent's workflow started.
	ChildStart bench.Summary `json:"childStart"`
	// FirstTask: started to its StartAttempt activity starting, split in
	// FirstTaskWait (started to its first workflow task started), FirstTaskRun
	// (that workflow task, to completed) and ActivityWait (completed to
	// StartAttempt started: the activity's dispatch).
	FirstTask     bench.Summary `json:"firstTask"`
	FirstTaskWait bench.Summary `json:"firstTaskWait"`
	FirstTaskRun  bench.Summary `json:"firstTaskRun"`
	ActivityWait  bench.Summary `json:"activityWait"`
	// ClaimWait, ClaimRun and AfterClaim split ActivityWait: the ClaimHost
	// activity's dispatch (scheduled to started), its run (the worker's
	// account join included), and its completion to StartAttempt started
	// (a workflow task and the start's dispatch).
	ClaimWait  bench.Summary `json:"claimWait"`
	ClaimRun   bench.Summary `json:"claimRun"`
	AfterClaim bench.Summary `json:"afterClaim"`
	// ParentWait and ParentRun split ParentTask: the run learning of the
	// end to its next workflow task starting, and that task's run (the
	// status.json write included) to its completion.
	ParentWait bench.Summary `json:"parentWait"`
	ParentRun  bench.Summary `json:"parentRun"`
	// PlanSpawn: StartAttempt started to the conductor's plan_start.
	PlanSpawn bench.Summary `json:"planSpawn"`
	Samples   int           `json:"samples"`
}

// taskMarks are the moments of one task workflow's history.
type taskMarks struct {
	started, attemptStarted, deliveryEnd, closed time.Time
	firstWFTStarted, firstWFTCompleted           time.Time
	// The first ClaimHost activity's moments.
	claimScheduled, claimStarted, claimCompleted time.Time
}

// historyEvents reads every event of a workflow's chain from runID ("" is
// the latest run, without following continue-as-new).
func historyEvents(ctx context.Context, c client.Client, workflowID, runID string) ([]*historypb.HistoryEvent, error) {
	var evs []*historypb.HistoryEvent
	follow := runID != ""
	for first := true; first || runID != ""; first = false {
		it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("history of %s: %w", workflowID, err)
			}
			evs = append(evs, ev)
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil && follow {
				next = a.GetNewExecutionRunId()
			}
		}
		runID = next
	}
	return evs, nil
}

// marksOf finds a task workflow's moments: its start, its first
// StartAttempt's start, the completion of the last activity that delivered
// events (StartAttempt or DeliverEvents), and its close.
func marksOf(evs []*historypb.HistoryEvent) taskMarks {
	var m taskMarks
	names := map[int64]string{}
	for _, ev := range evs {
		at := ev.GetEventTime().AsTime()
		switch {
		case ev.GetWorkflowExecutionStartedEventAttributes() != nil:
			if m.started.IsZero() {
				m.started = at
			}
		case ev.GetWorkflowTaskStartedEventAttributes() != nil:
			if m.firstWFTStarted.IsZero() {
				m.firstWFTStarted = at
			}
		case ev.GetWorkflowTaskCompletedEventAttributes() != nil:
			if m.firstWFTCompleted.IsZero() {
				m.firstWFTCompleted = at
			}
		case ev.GetActivityTaskScheduledEventAttributes() != nil:
			name := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			names[ev.GetEventId()] = name
			if name == "ClaimHost" && m.claimScheduled.IsZero() {
				m.claimScheduled = at
			}
		case ev.GetActivityTaskStartedEventAttributes() != nil:
			switch names[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] {
			case "StartAttempt":
				if m.attemptStarted.IsZero() {
					m.attemptStarted = at
				}
			case "ClaimHost":
				if m.claimStarted.IsZero() {
					m.claimStarted = at
				}
			}
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			switch names[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
			case "StartAttempt", "DeliverEvents":
				m.deliveryEnd = at
			case "ClaimHost":
				if m.claimCompleted.IsZero() {
					m.claimCompleted = at
				}
			}
		case ev.GetWorkflowExecutionCompletedEventAttributes() != nil, ev.GetWorkflowExecutionFailedEventAttributes() != nil:
			m.closed = at
		}
	}
	return m
}

// parentMarks are the run workflow's moments per task workflow id: when
// it learned of the child's end, when it initiated its start, and when
// the start was recorded.
type parentMarks struct {
	learned, initiated, started map[string]time.Time
	// wftStarted and wftCompleted are the run's workflow tasks, in order.
	wftStarted, wftCompleted []time.Time
}

func parentMarksOf(evs []*historypb.HistoryEvent) parentMarks {
	p := parentMarks{learned: map[string]time.Time{}, initiated: map[string]time.Time{}, started: map[string]time.Time{}}
	first := func(m map[string]time.Time, id string, at time.Time) {
		if _, ok := m[id]; !ok {
			m[id] = at
		}
	}
	for _, ev := range evs {
		at := ev.GetEventTime().AsTime()
		if ev.GetWorkflowTaskStartedEventAttributes() != nil {
			p.wftStarted = append(p.wftStarted, at)
		}
		if ev.GetWorkflowTaskCompletedEventAttributes() != nil {
			p.wftCompleted = append(p.wftCompleted, at)
		}
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			first(p.initiated, a.GetWorkflowId(), at)
		}
		if a := ev.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
			first(p.started, a.GetWorkflowExecution().GetWorkflowId(), at)
		}
		if a := ev.GetChildWorkflowExecutionCompletedEventAttributes(); a != nil {
			first(p.learned, a.GetWorkflowExecution().GetWorkflowId(), at)
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == taskapi.SignalTaskEnded {
			var end taskapi.TaskEnded
			if err := decodeSignal(a, &end); err == nil {
				first(p.learned, runapi.TaskWorkflowID(end.Task), at)
			}
		}
	}
	return p
}

// traceHandoffs reads the run's and every task's history and splits each
// hand-off into stages. spans are the conductors' plan start and end.
func traceHandoffs(ctx context.Context, c client.Client, run runplan.Run, runWorkflowID, firstRun string, spans map[string]span) (HandoffStages, error) {
	pevs, err := historyEvents(ctx, c, runWorkflowID, firstRun)
	if err != nil {
		return HandoffStages{}, err
	}
	parent := parentMarksOf(pevs)
	marks := make(map[string]taskMarks, len(run.Tasks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var firstErr error
	for _, t := range run.Tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			evs, err := historyEvents(ctx, c, runapi.TaskWorkflowID(t.ID), "")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = err
				return
			}
			marks[t.ID] = marksOf(evs)
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return HandoffStages{}, firstErr
	}
	var s [7][]time.Duration
	var ftWait, ftRun, actWait, pWait, pRun, clWait, clRun, clAfter []time.Duration
	// after is the first stamp in ts not before t.
	after := func(ts []time.Time, t time.Time) time.Time {
		i := sort.Search(len(ts), func(i int) bool { return !ts[i].Before(t) })
		if i == len(ts) {
			return t
		}
		return ts[i]
	}
	n := 0
	for _, t := range run.Tasks {
		if len(t.Depends) == 0 {
			continue
		}
		last := ""
		for _, d := range t.Depends {
			if last == "" || spans[d].end.After(spans[last].end) {
				last = d
			}
		}
		dm, tm := marks[last], marks[t.ID]
		did, tid := runapi.TaskWorkflowID(last), runapi.TaskWorkflowID(t.ID)
		points := []time.Time{spans[last].end, dm.deliveryEnd, dm.closed, parent.learned[did],
			parent.initiated[tid], tm.started, tm.attemptStarted, spans[t.ID].start}
		for i := range s {
			s[i] = append(s[i], points[i+1].Sub(points[i]))
		}
		ftWait = append(ftWait, tm.firstWFTStarted.Sub(tm.started))
		ftRun = append(ftRun, tm.firstWFTCompleted.Sub(tm.firstWFTStarted))
		actWait = append(actWait, tm.attemptStarted.Sub(tm.firstWFTCompleted))
		if !tm.claimCompleted.IsZero() {
			clWait = append(clWait, tm.claimStarted.Sub(tm.claimScheduled))
			clRun = append(clRun, tm.claimCompleted.Sub(tm.claimStarted))
			clAfter = append(clAfter, tm.attemptStarted.Sub(tm.claimCompleted))
		}
		ws := after(parent.wftStarted, parent.learned[did])
		pWait = append(pWait, ws.Sub(parent.learned[did]))
		pRun = append(pRun, after(parent.wftCompleted, ws).Sub(ws))
		n++
	}
	return HandoffStages{
		SeesEnd: bench.Summarize(s[0]), Bookkeeping: bench.Summarize(s[1]), ToParent: bench.Summarize(s[2]),
		ParentTask: bench.Summarize(s[3]), ChildStart: bench.Summarize(s[4]), FirstTask: bench.Summarize(s[5]),
		PlanSpawn: bench.Summarize(s[6]), Samples: n,
		FirstTaskWait: bench.Summarize(ftWait), FirstTaskRun: bench.Summarize(ftRun), ActivityWait: bench.Summarize(actWait),
		ParentWait: bench.Summarize(pWait), ParentRun: bench.Summarize(pRun),
		ClaimWait: bench.Summarize(clWait), ClaimRun: bench.Summarize(clRun), AfterClaim: bench.Summarize(clAfter),
	}, nil
}

// rssPeak samples the RSS of processes every interval until stopped, and
// keeps each one's peak in MB.
type rssPeak struct {
	stop func()
	mu   sync.Mutex
	peak map[int]float64
}

func sampleRSS(pids []int, every time.Duration) *rssPeak {
	p := &rssPeak{peak: map[int]float64{}}
	p.stop = sampleEvery(every, func() {
		for _, pid := range pids {
			if b, err := bench.RSS(pid); err == nil {
				p.mu.Lock()
				p.peak[pid] = max(p.peak[pid], mb(b))
				p.mu.Unlock()
			}
		}
	})
	return p
}

// sampleEvery runs sample now and then every interval until the function
// it returns is called, which waits for the last sample to end.
func sampleEvery(every time.Duration, sample func()) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func (p *rssPeak) of(pid int) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak[pid]
}

func decodeSignal(a *historypb.WorkflowExecutionSignaledEventAttributes, v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), v)
}
