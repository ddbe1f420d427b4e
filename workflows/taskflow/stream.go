package taskflow

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/canonical"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/mapping/redact"
)

// The task's canonical event stream, as the workflow writes it. Each step
// (the task started, an attempt started or ended, a status decided, a
// signal received) becomes an event here, made by canonical.FromStep from
// workflow time and state, so the same on every replay. It waits in
// StreamState.Pending until the next activity the workflow runs anyway
// carries it (taskact.StreamInfo) and stores it before doing its own
// work: no history event of its own, and no new command, so histories
// recorded before the stream existed replay unchanged. The one exception
// is the very end: steps made after the last activity (a signal that came
// while the final status was written) go in a local activity, behind a
// version marker.
//
// Each step's raw_ref is the workflow chain (its first run) plus a
// sequence number carried across continue-as-new, which is what keeps a
// retried activity from storing a step twice.

// StreamState is the stream's part of the workflow's state.
type StreamState struct {
	RunID  string `json:"runId"`
	Source string `json:"source"`
	// Seq is the last step's sequence number.
	Seq int `json:"seq"`
	// Agent is the workflow agent's state after the last step.
	Agent canonical.State `json:"agent,omitempty"`
	// Pending are steps not yet handed to an activity.
	Pending []canonical.Event `json:"pending,omitempty"`
}

// beginStream starts the stream of a new workflow with its first step.
// Workflows that began before the stream existed have none and write none:
// their state, carried across continue-as-new, has no StreamState.
func (r *taskRun) beginStream() {
	info := workflow.GetInfo(r.ctx)
	r.st.Stream = &StreamState{
		RunID:  taskapi.StreamRunID(r.st.Dispatch.TaskID),
		Source: canonical.StepSource(info.Namespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID),
	}
	r.step(canonical.Step{Kind: canonical.StepTaskStarted, Title: canonical.TitleOf(r.st.Dispatch.Message, taskapi.SummaryRunes)})
}

// step makes the event of one step and keeps it until an activity carries
// it. The attempt and its plan name are the current attempt's.
func (r *taskRun) step(s canonical.Step) {
	st := r.st.Stream
	if st == nil {
		return
	}
	st.Seq++
	s.Seq, s.TS, s.Prev = st.Seq, workflow.Now(r.ctx), st.Agent
	if s.Attempt == 0 {
		s.Attempt = r.st.Current.N
	}
	if s.Plan == "" {
		s.Plan = mapping.AttemptPlanName(r.st.Dispatch.TaskID, s.Attempt, r.st.Current.Nonce)
	}
	// Its free text (the task's title, a reason) is redacted here already,
	// not only when the step is stored: the step travels in an activity's
	// input, which history keeps.
	s.Title, s.Reason = redact.String(s.Title), redact.String(s.Reason)
	ev := canonical.FromStep(s, canonical.StepContext{RunID: st.RunID, TaskID: r.st.Dispatch.TaskID, Source: st.Source})
	if ev.AgentID == canonical.WorkflowAgent {
		st.Agent = ev.State
	}
	st.Pending = append(st.Pending, ev)
}

// stepStatus is the step of a task status the workflow writes.
func (r *taskRun) stepStatus(status mapping.TaskStatus, reason string) {
	b := r.st.Current.Brief
	r.step(canonical.Step{Kind: canonical.StepTaskStatus, Status: string(status), Reason: reason,
		Aborted: mapping.IsAbort(reason), PhasesDone: b.Brief.CompletedPhases, PhasesTotal: len(b.PhaseOrder)})
}

// stepAttemptEnded is the step of the current attempt's end.
func (r *taskRun) stepAttemptEnded(ended, lastError string) {
	a := r.st.Current
	s := canonical.Step{Kind: canonical.StepAttemptEnded, Status: ended, Reason: lastError,
		PhasesDone: a.Brief.Brief.CompletedPhases, PhasesTotal: len(a.Brief.PhaseOrder)}
	if cost := spent(a.Brief); cost > 0 {
		s.CostUSD = &cost
	}
	r.step(s)
}

// stepAttemptStarted: a new attempt, and the dispatched status its start
// writes. A task that had completed is reopened first.
func (r *taskRun) stepAttemptStarted() {
	if st := r.st.Stream; st != nil && st.Agent == canonical.StateDone {
		r.step(canonical.Step{Kind: canonical.StepReopened})
	}
	r.step(canonical.Step{Kind: canonical.StepAttemptStarted})
	r.stepStatus(mapping.TaskDispatched, "")
}

// streamFor is the stream for the next activity, handing it the pending
// steps; nil when the workflow writes no stream. The steps stay pending
// until streamStored hears the activity succeeded: one that fails for good
// (its host lost, a non-retryable error) leaves them to the next activity,
// so the stream has no gap. Handing a step twice is safe: the store keeps
// one event per step (its raw_ref). No command depends on what is
// pending but the flush at the very end, which is behind its own version
// marker, so recorded histories replay unchanged: no version of its own.
func (r *taskRun) streamFor() *taskact.StreamInfo {
	st := r.st.Stream
	if st == nil {
		return nil
	}
	return &taskact.StreamInfo{RunID: st.RunID, Attempt: r.st.Current.N, Steps: slices.Clone(st.Pending)}
}

// streamStored drops from the pending steps those an activity that
// succeeded has stored.
func (r *taskRun) streamStored(info *taskact.StreamInfo) {
	st := r.st.Stream
	if st == nil || info == nil || len(info.Steps) == 0 {
		return
	}
	stored := make(map[string]bool, len(info.Steps))
	for _, ev := range info.Steps {
		stored[ev.RawRef] = true
	}
	st.Pending = slices.DeleteFunc(st.Pending, func(ev canonical.Event) bool { return stored[ev.RawRef] })
}

// countStream adds what an activity stored to the task's counts.
func (r *taskRun) countStream(c activities.StreamCounts) {
	r.st.Counts.StreamEvents += c.Appended
	r.st.Counts.StreamWarnings += c.Warnings
	r.st.Counts.StreamDropped += c.Dropped
}

// flushSteps stores the steps no activity is left to carry. A failure is
// logged: the task's outcome does not depend on its stream.
func (r *taskRun) flushSteps() {
	st := r.st.Stream
	if st == nil || len(st.Pending) == 0 {
		return
	}
	if workflow.GetVersion(r.ctx, versionStreamFlush, workflow.DefaultVersion, 1) < 1 {
		return
	}
	info := r.streamFor()
	summary := fmt.Sprintf("store %d event(s) of task %s", len(info.Steps), r.st.Dispatch.TaskID)
	var c activities.StreamCounts
	err := workflow.ExecuteLocalActivity(appendOptions(r.ctx, summary), acts.AppendEvents,
		taskact.AppendRequest{Stream: *info}).Get(r.ctx, &c)
	if err != nil {
		r.log.Warn("events of the workflow's end not stored", "task", r.st.Dispatch.TaskID, "error", err)
		return
	}
	r.streamStored(info)
	r.countStream(c)
}
