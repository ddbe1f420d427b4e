//go:build realserver

package testrig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/wait"
	"karvi-edda-temporal/workflows"
)

// Start starts the task workflow for d; see StartInput.
func (r *Rig) Start(d mapping.DispatchPlan) client.WorkflowRun {
	r.t.Helper()
	return r.StartInput(taskapi.TaskInput{Dispatch: d})
}

// StartInput starts a task workflow on the rig's queue. With a karvifake it
// first adds the task there if karvi does not know it yet.
func (r *Rig) StartInput(in taskapi.TaskInput) client.WorkflowRun {
	r.t.Helper()
	run, err := r.TryStart(in)
	require.NoError(r.t, err)
	return run
}

// TryStart is StartInput returning the error, for tests of refused starts.
func (r *Rig) TryStart(in taskapi.TaskInput) (client.WorkflowRun, error) {
	if r.Karvi != nil && in.Dispatch.TaskID != "" {
		if _, ok := r.Karvi.Task(in.Dispatch.TaskID); !ok {
			r.AddKarviTask(in.Dispatch.TaskID)
		}
	}
	run, err := r.Tasks().Start(context.Background(), in, taskapi.StartOptions{})
	if err == nil {
		r.Track(taskapi.WorkflowID(in.Dispatch.TaskID))
	}
	return run, err
}

// Tasks is the task workflows' client on the rig's queue.
func (r *Rig) Tasks() taskapi.Tasks {
	return taskapi.Tasks{Client: r.Client, TaskQueue: r.Queue}
}

// Result waits for the workflow's result; the 3-minute deadline only keeps
// a hung test from hanging the suite.
func (r *Rig) Result(run client.WorkflowRun) taskapi.Result {
	r.t.Helper()
	res, err := r.ResultErr(run)
	require.NoError(r.t, err)
	return res
}

// ResultErr is Result returning the workflow's error.
func (r *Rig) ResultErr(run client.WorkflowRun) (taskapi.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res taskapi.Result
	err := run.Get(ctx, &res)
	return res, err
}

// Status asks a task's workflow for its status query.
func (r *Rig) Status(taskID string) (taskapi.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.queryStatus(ctx, taskID)
}

func (r *Rig) queryStatus(ctx context.Context, taskID string) (taskapi.Status, error) {
	return r.Tasks().Status(ctx, taskID)
}

// WaitFor polls the status query until cond holds; Temporal pushes no
// query results, so polling is the only way to watch them. The deadline is
// a safety net against a hung test, not a timing assertion; on it the test
// fails with the last status seen.
func (r *Rig) WaitFor(taskID, what string, cond func(taskapi.Status) bool) taskapi.Status {
	r.t.Helper()
	var last taskapi.Status
	wait.Eventually(r.t, 2*time.Minute, "task "+taskID+": "+what, func() (any, bool) {
		s, err := r.Status(taskID)
		if err != nil {
			return fmt.Errorf("status %+v; query error %w", last, err), false
		}
		last = s
		return s, cond(s)
	})
	return last
}

// WaitPhase waits until a conductor of the task runs phase, as its run
// record and event log say, and returns what the test needs to act inside
// the phase: the plan and the conductor's pid. The workflow learns of a
// phase only at its next checkpoint (an attempt's first one comes after a
// second), so its status would name the phase too late for a short one.
func (r *Rig) WaitPhase(taskID, phase string) taskapi.Status {
	r.t.Helper()
	var found taskapi.Status
	wait.EventuallyEvery(r.t, 2*time.Minute, 10*time.Millisecond, "task "+taskID+": a conductor running phase "+phase, func() (any, bool) {
		runs, err := devenv.Runs(r.WorkRoot)
		require.NoError(r.t, err)
		var plans []string
		for _, run := range runs {
			if run.TaskID != taskID {
				continue
			}
			plans = append(plans, fmt.Sprintf("%s (pid %d)", run.Plan, run.Handle.PID))
			if run.Handle.PID > 0 && PhaseRunning(r.EventsPath(taskID, run.Plan), phase) {
				found = taskapi.Status{TaskID: taskID, Stage: taskapi.StageRunning, PlanName: run.Plan,
					CurrentPhase: phase, ConductorPID: run.Handle.PID}
				return nil, true
			}
		}
		return plans, false
	})
	return found
}

// PhaseRunning reports whether a conductor's events.jsonl, as it is now,
// shows phase started and not yet ended.
func PhaseRunning(eventsPath, phase string) bool {
	data, err := os.ReadFile(eventsPath)
	if err != nil {
		return false
	}
	current := ""
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		var ev struct {
			Type    string `json:"type"`
			PhaseID string `json:"phase_id"`
		}
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		switch mapping.NormalizeEventType(ev.Type) {
		case mapping.EventPhaseStart:
			current = ev.PhaseID
		case mapping.EventPhasePassed, mapping.EventPhaseFailed, mapping.EventPhaseSkipped:
			if ev.PhaseID == current {
				current = ""
			}
		}
	}
	return current == phase
}

// Signal sends a signal to a task's workflow.
func (r *Rig) Signal(taskID, name string, arg any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.Tasks().Signal(ctx, taskID, "", name, arg)
}

// History is the event history of the task's latest workflow run.
func (r *Rig) History(taskID string) *historypb.History {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := r.Client.GetWorkflowHistory(ctx, taskapi.WorkflowID(taskID), "", false,
		enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(r.t, err)
		h.Events = append(h.Events, ev)
	}
	return h
}

// Replay runs the task workflow's current code over a recorded history; a
// change of the workflow that is not replay-safe fails here.
func Replay(h *historypb.History) error {
	rep := worker.NewWorkflowReplayer()
	workflows.Register(rep)
	return rep.ReplayWorkflowHistory(nil, h)
}
