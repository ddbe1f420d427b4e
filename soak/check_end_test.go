package soak

import (
	"fmt"
	"testing"
)

func TestCheckEndsOnceAndAgrees(t *testing.T) {
	good := func() TaskObs {
		return TaskObs{ID: "a",
			Workflow: &WorkflowObs{Closed: true, CloseStatus: "completed", Closes: 1, Outcome: "completed", TaskStatus: "completed", Attempt: 1, PlanName: planA1},
			Board: &BoardTask{Status: "completed", History: []StatusChange{
				{At: at(1), Status: "dispatched"}, {At: at(2), Status: "in_progress"}, {At: at(9), Status: "completed"}}},
			Brief: &Brief{PlanName: planA1, Phases: map[string]string{"implement": "passed", "docs": "skipped"}},
		}
	}
	mod := func(fn func(*TaskObs)) []TaskObs {
		t := good()
		fn(&t)
		return []TaskObs{t}
	}
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{name: "completed everywhere", o: Observed{Tasks: []TaskObs{good()}}},
		{name: "a run's task done", o: Observed{Tasks: mod(func(t *TaskObs) {
			t.Run, t.Board, t.RunStatus = "r", nil, &RunTaskStatus{Status: "done"}
		})}},
		{name: "a run's task never started: its dependency failed", o: Observed{Tasks: []TaskObs{{ID: "b", Run: "r", RunStatus: &RunTaskStatus{Status: "blocked"}}}}},
		{name: "a run's task never started: the run's blocking budget was spent", o: Observed{Tasks: []TaskObs{
			{ID: "a", Run: "r", RunStatus: &RunTaskStatus{Status: "blocked"},
				Workflow: &WorkflowObs{Closed: true, Outcome: "blocked", OutcomeError: "Budget exceeded ($0.94 spent of $0.78)"}},
			{ID: "c", Run: "r", RunStatus: &RunTaskStatus{Status: "queued"}}}}},
		{name: "a run's task never started: its blocking budget spent at a report between tasks", o: Observed{
			Journal: []Record{{Kind: RecRunStart, Run: "r", Details: map[string]string{"budgetAction": "block"}}},
			Tasks: []TaskObs{
				{ID: "c", Run: "r", RunStatus: &RunTaskStatus{Status: "queued"}}}}},
		{name: "a run's task left queued with no cause", o: Observed{Tasks: []TaskObs{
			{ID: "c", Run: "r", RunStatus: &RunTaskStatus{Status: "queued"}}}},
			want: []want{{InvEndsOnceAndAgrees, "c", []string{"never ended: no workflow of the task was found"}}}},
		{name: "blocked, sent back, completed", o: Observed{
			Tasks: mod(func(t *TaskObs) {
				t.Workflow.Closes = 2
				t.Board.History = []StatusChange{{Status: "in_progress"}, {Status: "blocked"}, {Status: "dispatched"}, {Status: "in_progress"}, {Status: "completed"}}
			}),
			Journal: []Record{{Kind: RecBoardAdd, Task: "a"}, {Kind: RecSendBack, Task: "a"}},
		}},
		{name: "cancelled on the board by a person", o: Observed{
			Tasks: mod(func(t *TaskObs) {
				t.Workflow.Outcome, t.Workflow.TaskStatus = "blocked", "blocked"
				t.Board.Status = "cancelled"
				t.Brief.Phases["implement"] = "failed"
			}),
			Journal: []Record{{At: at(3), Kind: RecCancel, Task: "a"}},
		}},
		{name: "cancelled on the board before the intake took it", o: Observed{
			Tasks:   []TaskObs{{ID: "a", Board: &BoardTask{Status: "cancelled"}}},
			Journal: []Record{{At: at(3), Kind: RecCancel, Task: "a"}},
		}},
		{name: "the last status write was refused", o: Observed{
			Tasks: mod(func(t *TaskObs) {
				t.Workflow.Outcome, t.Workflow.TaskStatus = "blocked", "in_progress"
				t.Board.Status = "cancelled"
				t.Brief.Phases["implement"] = "failed"
			}),
			Journal: []Record{{At: at(3), Kind: RecCancel, Task: "a"}},
		}},
		{name: "the workflow's last status write disagrees with its outcome", o: Observed{Tasks: mod(func(t *TaskObs) {
			t.Workflow.TaskStatus = "blocked"
		})}, want: []want{{InvEndsOnceAndAgrees, "a", []string{"task status blocked, its outcome completed"}}}},
		{name: "never ended", o: Observed{Tasks: mod(func(t *TaskObs) {
			t.Workflow.Closed, t.Workflow.Stage = false, "paused"
		})}, want: []want{{InvEndsOnceAndAgrees, "a", []string{"never ended", "paused at attempt 1", planA1}}}},
		{name: "no workflow at all", o: Observed{Tasks: []TaskObs{{ID: "a"}}},
			want: []want{{InvEndsOnceAndAgrees, "a", []string{"no workflow"}}}},
		{name: "karvi disagrees", o: Observed{Tasks: mod(func(t *TaskObs) {
			t.Board.Status, t.Board.Blocker = "blocked", "agent crashed"
			t.Board.History = append(t.Board.History, StatusChange{At: at(10), Status: "blocked"})
		})}, want: []want{
			{InvEndsOnceAndAgrees, "a", []string{"ended twice", "completed at 14:00:09.000, then blocked at 14:00:10.000"}},
			{InvEndsOnceAndAgrees, "a", []string{"karvi says blocked", "agent crashed", "ended completed at attempt 1"}},
		}},
		{name: "the brief is of another attempt and shows a phase running", o: Observed{Tasks: mod(func(t *TaskObs) {
			t.Brief.PlanName = planA2
			t.Brief.Phases["test"] = "running"
		})}, want: []want{
			{InvEndsOnceAndAgrees, "a", []string{"brief is about plan " + planA2 + ", the workflow ended with plan " + planA1}},
			{InvEndsOnceAndAgrees, "a", []string{"phase test running"}},
		}},
		{name: "completed with a phase failed on the brief", o: Observed{Tasks: mod(func(t *TaskObs) {
			t.Brief.Phases["test"] = "failed"
		})}, want: []want{{InvEndsOnceAndAgrees, "a", []string{"completed but its brief shows phase test failed"}}}},
		{name: "status.json still running", o: Observed{Tasks: mod(func(t *TaskObs) {
			t.Run, t.RunStatus = "r", &RunTaskStatus{Status: "running"}
		})}, want: []want{{InvEndsOnceAndAgrees, "a", []string{"status.json still says running"}}}},
		{name: "status.json done for a blocked task", o: Observed{Tasks: mod(func(t *TaskObs) {
			t.Board = nil
			t.Workflow.Outcome, t.Workflow.TaskStatus, t.Workflow.OutcomeError = "blocked", "blocked", "boom"
			t.Brief.Phases["implement"] = "failed"
			t.Run, t.RunStatus = "r", &RunTaskStatus{Status: "done"}
		})}, want: []want{{InvEndsOnceAndAgrees, "a", []string{"says done, the workflow ended blocked", "boom"}}}},
		{name: "two chains ended it, one start", o: Observed{
			Tasks:   mod(func(t *TaskObs) { t.Workflow.Closes = 2 }),
			Journal: []Record{{Kind: RecTaskStart, Task: "a"}},
		}, want: []want{{InvEndsOnceAndAgrees, "a", []string{"ended 2 times", "1 times"}}}},
		{name: "the workflow failed", o: Observed{Tasks: mod(func(t *TaskObs) {
			t.Workflow.CloseStatus = "terminated"
		})}, want: []want{{InvEndsOnceAndAgrees, "a", []string{"closed terminated"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expect(t, CheckEndsOnceAndAgrees(&tc.o, Config{}), tc.want...) })
	}
}

func TestCheckBriefLogMatchesEvents(t *testing.T) {
	events := []Event{
		{Line: 1, Type: "plan_start", Time: "t1"},
		{Line: 2, Type: "phase_start", Phase: "implement", Time: "t2"},
		{Line: 3, Type: "phase_passed", Phase: "implement", Time: "t3"},
		{Line: 5, Type: "phase_start", Phase: "test", Time: "t5"},
		{Line: 6, Type: "plan_aborted", Time: "t6"},
	}
	log := []LogEntry{
		{Time: "t1", Agent: "conductor", Action: "plan_start", Detail: "2 phases"},
		{Time: "t2", Agent: "conductor", Action: "phase_start", Detail: "implement"},
		{Time: "t2b", Agent: "bridge", Action: "budget", Detail: "Budget warning"},
		{Time: "t3", Agent: "conductor", Action: "phase_passed", Detail: "implement (3s, $0.42)"},
		{Time: "t5", Agent: "conductor", Action: "phase_start", Detail: "test"},
	}
	task := func(log []LogEntry, events []Event) TaskObs {
		return TaskObs{ID: "a", Workflow: &WorkflowObs{Closed: true, PlanName: planA1},
			Brief: &Brief{PlanName: planA1, Log: log},
			Plans: []PlanObs{{Name: "karvi-a-r1-other", Events: events[:1]}, {Name: planA1, Events: events, Malformed: 1}}}
	}
	left := func(t TaskObs) TaskObs {
		t.Workflow.Attempts = []AttemptSummary{{Attempt: 1, PlanName: planA1, Ended: "aborted", ConductorLeft: true}}
		return t
	}
	drop := func(l []LogEntry, i int) []LogEntry {
		return append(append([]LogEntry{}, l[:i]...), l[i+1:]...)
	}
	var bigLog []LogEntry
	var bigEvents []Event
	for i := range 700 {
		tm := fmt.Sprintf("t%d", i)
		bigEvents = append(bigEvents, Event{Line: i + 1, Type: "heartbeat", Time: tm})
		if i >= 200 {
			bigLog = append(bigLog, LogEntry{Time: tm, Agent: "conductor", Action: "heartbeat"})
		}
	}
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{name: "one for one, notes between", o: Observed{Tasks: []TaskObs{task(log, events)}}},
		{name: "the log keeps the newest 500", o: Observed{Tasks: []TaskObs{task(bigLog, bigEvents)}}},
		{name: "an event missing from the log", o: Observed{Tasks: []TaskObs{task(drop(log, 3), events)}},
			want: []want{{InvBriefLogMatchesEvents, "a", []string{planA1, "3 conductor entries, events.jsonl 4 events", "1 malformed", "entry 3 differs", "line 3 {t3 phase_passed implement}"}}}},
		{name: "the last event missing from the log", o: Observed{Tasks: []TaskObs{task(log[:4], events)}},
			want: []want{{InvBriefLogMatchesEvents, "a", []string{"first event missing from the log: line 5"}}}},
		{name: "an entry twice", o: Observed{Tasks: []TaskObs{task(append(append([]LogEntry{}, log...), log[4]), events)}},
			want: []want{{InvBriefLogMatchesEvents, "a", []string{"first extra log entry: {t5 phase_start \"test\"}"}}}},
		{name: "an entry of another phase", o: Observed{Tasks: []TaskObs{task(func() []LogEntry {
			l := append([]LogEntry{}, log...)
			l[4].Detail = "docs"
			return l
		}(), events)}}, want: []want{{InvBriefLogMatchesEvents, "a", []string{"entry 4 differs"}}}},
		// An attempt that left its conductor behind (its host took no
		// stop within the grace) delivered a prefix of its events: its
		// conductor wrote on.
		{name: "a left conductor wrote on", o: Observed{Tasks: []TaskObs{left(task(log[:4], events))}}},
		{name: "a left conductor's log still differs", o: Observed{Tasks: []TaskObs{left(task(drop(log, 3), events))}},
			want: []want{{InvBriefLogMatchesEvents, "a", []string{"entry 3 differs"}}}},
		{name: "a left conductor's log has an extra entry", o: Observed{Tasks: []TaskObs{left(task(append(append([]LogEntry{}, log...), log[4]), events))}},
			want: []want{{InvBriefLogMatchesEvents, "a", []string{"first extra log entry"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expect(t, CheckBriefLogMatchesEvents(&tc.o, Config{}), tc.want...) })
	}
}

func TestCheckWebhookIDsUnique(t *testing.T) {
	wh := func(s float64, id, digest, time string) Webhook {
		return Webhook{At: at(s), ID: id, Kind: "paused", Task: "a", Time: time, Digest: digest}
	}
	expect(t, CheckWebhookIDsUnique(&Observed{Webhooks: []Webhook{
		wh(1, "karvi-task-a-paused-1", "d1", "14:00:01"),
		wh(2, "karvi-task-a-paused-1", "d1", "14:00:01"), // a retry
		wh(3, "karvi-task-a-resumed-1", "d2", "14:00:03"),
	}}, Config{}))
	// A second workflow chain of the task numbers its pauses from 1 again.
	expect(t, CheckWebhookIDsUnique(&Observed{Webhooks: []Webhook{
		wh(1, "karvi-task-a-paused-1", "d1", "14:00:01"),
		wh(2, "karvi-task-a-resumed-1", "d2", "14:00:03"),
		wh(40, "karvi-task-a-paused-1", "d3", "14:00:40"),
	}}, Config{}), want{InvWebhookIDsUnique, "a", []string{"karvi-task-a-paused-1 names 2 different events", "time=14:00:01", "time=14:00:40"}})
}
