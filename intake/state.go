package intake

import "sort"

// Phases of a claim.
const (
	// PhaseRunning: the task's workflow (or its run) was started and has
	// not been reported ended.
	PhaseRunning = "running"
	// PhaseEnded: the workflow ended; the task runs again only when the
	// board sends it back.
	PhaseEnded = "ended"
	// PhaseRefused: the intake took the task and blocked it on karvi with a
	// reason (bad input, a late joiner of a run); it is never taken again
	// while karvi keeps it.
	PhaseRefused = "refused"
)

// State is what the intake has claimed: small, serialisable, carried by
// the intake workflow across continue-as-new. Claims are kept sorted by
// task id, runs by project id, so equal states encode equally. It holds
// only tasks and projects still on the board: Reconcile forgets an entry
// once karvi has deleted the task (or project) and nothing runs for it.
type State struct {
	// Version is the highest board _version seen: an older snapshot is
	// stale and Reconcile takes no action on it.
	Version int64 `json:"version"`
	// Stale counts the boards in a row older than Version (see StaleLimit).
	Stale int `json:"stale,omitempty"`
	// LastKey is the last claim key handed out (see Claim.Key).
	LastKey int64      `json:"lastKey,omitempty"`
	Claims  []Claim    `json:"claims,omitempty"`
	Runs    []RunClaim `json:"runs,omitempty"`
}

// Claim is one task the intake has taken.
type Claim struct {
	TaskID string `json:"taskId"`
	// RunWorkflowID is set when the task belongs to a run.
	RunWorkflowID string `json:"runWorkflowId,omitempty"`
	Phase         string `json:"phase"`
	// Attempt counts dispatches: 1 at the claim, one more per redispatch.
	Attempt int `json:"attempt"`
	// Mark is the length of the task's history when it was last
	// dispatched: entries past it were written since.
	Mark int `json:"mark"`
	// Final is the status the workflow wrote to karvi when it ended
	// (completed or blocked).
	Final string `json:"final,omitempty"`
	// Settled records that the board showed the task at its final status
	// (or past it: reviewing, needs_revision, approved) after the workflow
	// ended, so a later in_progress is a send-back even when the history no
	// longer shows it.
	Settled bool `json:"settled,omitempty"`
	// Aborted records that an abort was asked, so it is asked once.
	Aborted bool `json:"aborted,omitempty"`
	// EndedRunID is the run id of the task workflow whose end was last
	// recorded: after a send-back, that closed workflow is not the new
	// attempt's, and is not taken for its end.
	EndedRunID string `json:"endedRunId,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Key is the claim's own number, never handed out twice by one
	// intake: the workflows started for the claim carry it in their memo,
	// so the intake tells them from a workflow of the same id that
	// someone else started (a task run by hand, another board, an older
	// task of a reused id). 0 for claims made before keys existed.
	Key int64 `json:"key,omitempty"`
}

// RunClaim is one project turned into a run.
type RunClaim struct {
	ProjectID  string   `json:"projectId"`
	WorkflowID string   `json:"workflowId"`
	Tasks      []string `json:"tasks"`
	Paused     bool     `json:"paused,omitempty"`
	// Refused is set when the project could not become a run; it is
	// reported once.
	Refused string `json:"refused,omitempty"`
	// Key marks the run workflow the intake started (see Claim.Key).
	Key int64 `json:"key,omitempty"`
}

// Claim returns the claim of a task.
func (s State) Claim(taskID string) (Claim, bool) {
	i := sort.Search(len(s.Claims), func(i int) bool { return s.Claims[i].TaskID >= taskID })
	if i < len(s.Claims) && s.Claims[i].TaskID == taskID {
		return s.Claims[i], true
	}
	return Claim{}, false
}

// Run returns the run claim of a project.
func (s State) Run(projectID string) (RunClaim, bool) {
	for _, r := range s.Runs {
		if r.ProjectID == projectID {
			return r, true
		}
	}
	return RunClaim{}, false
}

// Ended records that a claimed task's workflow ended after writing final
// (the status it left the task in on karvi: completed or blocked). An
// unknown task or a claim not running is left as it is, so a late or
// repeated report is harmless. The workflow must write final only as its
// last status write: a board that shows it is then past the end.
func (s State) Ended(taskID, final string) State {
	return s.EndedAs(taskID, final, "")
}

// EndedAs is Ended for the task workflow of run id runID.
func (s State) EndedAs(taskID, final, runID string) State {
	out := s.clone()
	for i := range out.Claims {
		if out.Claims[i].TaskID == taskID && out.Claims[i].Phase == PhaseRunning {
			out.Claims[i].Phase = PhaseEnded
			out.Claims[i].Final = final
			out.Claims[i].Settled = false
			out.Claims[i].EndedRunID = runID
		}
	}
	return out
}

func (s State) clone() State {
	out := State{Version: s.Version, Stale: s.Stale, LastKey: s.LastKey}
	out.Claims = append([]Claim(nil), s.Claims...)
	sort.SliceStable(out.Claims, func(i, j int) bool { return out.Claims[i].TaskID < out.Claims[j].TaskID })
	for _, r := range s.Runs {
		r.Tasks = append([]string(nil), r.Tasks...)
		out.Runs = append(out.Runs, r)
	}
	return out
}

// newKey hands out the next claim key.
func (s *State) newKey() int64 {
	s.LastKey++
	return s.LastKey
}

func (s *State) put(c Claim) {
	i := sort.Search(len(s.Claims), func(i int) bool { return s.Claims[i].TaskID >= c.TaskID })
	if i < len(s.Claims) && s.Claims[i].TaskID == c.TaskID {
		s.Claims[i] = c
		return
	}
	s.Claims = append(s.Claims, Claim{})
	copy(s.Claims[i+1:], s.Claims[i:])
	s.Claims[i] = c
}

func (s *State) putRun(r RunClaim) {
	for i := range s.Runs {
		if s.Runs[i].ProjectID == r.ProjectID {
			s.Runs[i] = r
			return
		}
	}
	s.Runs = append(s.Runs, r)
	sort.Slice(s.Runs, func(i, j int) bool { return s.Runs[i].ProjectID < s.Runs[j].ProjectID })
}

// Refused records that the start of a claimed task was refused, and the
// task blocked on karvi with reason: its workflow id was taken by a
// workflow this claim did not start (see Action.Key). The claim is then
// refused as a bad task is: nothing of it runs, a cancel aborts nothing,
// and the task is taken again, as a new claim, when a person moves it on
// from blocked. A claim not running is left as it is.
func (s State) Refused(taskID, reason string) State {
	out := s.clone()
	for i := range out.Claims {
		if c := &out.Claims[i]; c.TaskID == taskID && c.Phase == PhaseRunning {
			c.Phase, c.Reason = PhaseRefused, reason
		}
	}
	return out
}

// RefusedRun records that a project's run could not start for reason
// (its workflow id was taken by a workflow this intake did not start):
// the run and every task claimed with it are refused, as a project the
// rules refuse.
func (s State) RefusedRun(projectID, reason string) State {
	out := s.clone()
	for i := range out.Runs {
		r := &out.Runs[i]
		if r.ProjectID != projectID || r.Refused != "" {
			continue
		}
		r.Refused = reason
		for j := range out.Claims {
			if c := &out.Claims[j]; c.RunWorkflowID == r.WorkflowID && c.Phase == PhaseRunning {
				c.Phase, c.Reason = PhaseRefused, reason
			}
		}
	}
	return out
}
