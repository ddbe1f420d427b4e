package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Plan statuses, as edda serialises PlanStatus.
const (
	planPending   = "pending"
	planRunning   = "running"
	planBlocked   = "blocked"
	planCompleted = "completed"
	planAborted   = "aborted"
)

// Phase statuses, as edda serialises PhaseStatus.
const (
	phasePending  = "pending"
	phaseRunning  = "running"
	phaseChecking = "checking"
	phasePassed   = "passed"
	phaseFailed   = "failed"
	phaseSkipped  = "skipped"
	phaseStale    = "stale"
)

// Error types, as edda serialises ErrorType.
const (
	errAgentCrash     = "agent_crash"
	errCheckFailed    = "check_failed"
	errTimeout        = "timeout"
	errBudgetExceeded = "budget_exceeded"
)

// PlanState is state.json. Field names, order and omission rules follow
// edda's PlanState so readers of the real file can read this one.
type PlanState struct {
	PlanName     string       `json:"plan_name"`
	PlanFile     string       `json:"plan_file"`
	PlanStatus   string       `json:"plan_status"`
	StartedAt    *string      `json:"started_at,omitempty"`
	CompletedAt  *string      `json:"completed_at,omitempty"`
	AbortedAt    *string      `json:"aborted_at,omitempty"`
	TotalCostUSD float64      `json:"total_cost_usd"`
	CostMeasured bool         `json:"cost_measured"`
	Phases       []PhaseState `json:"phases"`
	Version      int          `json:"version"`
}

// PhaseState is one entry of state.json phases[].
type PhaseState struct {
	ID           string        `json:"id"`
	Status       string        `json:"status"`
	StartedAt    *string       `json:"started_at,omitempty"`
	CompletedAt  *string       `json:"completed_at,omitempty"`
	Attempts     int           `json:"attempts"`
	Checks       []CheckResult `json:"checks"`
	Error        *ErrorInfo    `json:"error,omitempty"`
	SkipReason   *string       `json:"skip_reason,omitempty"`
	RetryContext *string       `json:"retry_context,omitempty"`
}

// ErrorInfo is a phase's last error.
type ErrorInfo struct {
	ErrorType  string `json:"error_type"`
	Message    string `json:"message"`
	Retryable  bool   `json:"retryable"`
	CheckIndex *int   `json:"check_index,omitempty"`
	Timestamp  string `json:"timestamp"`
}

// CheckResult is the outcome of one check of one attempt.
type CheckResult struct {
	CheckType  string  `json:"check_type"`
	Status     string  `json:"status"` // waiting|running|passed|failed
	Detail     *string `json:"detail,omitempty"`
	DurationMS int64   `json:"duration_ms"`
}

func nowRFC3339() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func strPtr(s string) *string { return &s }

func newPlanState(p *Plan, planFile string) *PlanState {
	st := &PlanState{PlanName: p.Name, PlanFile: planFile, PlanStatus: planPending}
	for _, ph := range p.Phases {
		st.Phases = append(st.Phases, PhaseState{ID: ph.ID, Status: phasePending, Checks: []CheckResult{}})
	}
	return st
}

func (s *PlanState) phase(id string) *PhaseState {
	for i := range s.Phases {
		if s.Phases[i].ID == id {
			return &s.Phases[i]
		}
	}
	return nil
}

func (s *PlanState) count(status string) int {
	n := 0
	for _, p := range s.Phases {
		if p.Status == status {
			n++
		}
	}
	return n
}

var validTransitions = map[string][]string{
	phasePending:  {phaseRunning, phaseSkipped},
	phaseRunning:  {phaseChecking, phaseFailed, phaseStale},
	phaseChecking: {phasePassed, phaseFailed},
	phaseFailed:   {phasePending},
	phaseStale:    {phasePending},
}

// transition is edda's compare-and-set phase transition: a no-op when the
// phase is not in `from`, an error when the move is not allowed.
func (s *PlanState) transition(id, from, to string, update func(*PhaseState)) (bool, error) {
	ps := s.phase(id)
	if ps == nil {
		return false, fmt.Errorf("phase not found: %q", id)
	}
	if ps.Status != from {
		return false, nil
	}
	allowed := false
	for _, t := range validTransitions[from] {
		allowed = allowed || t == to
	}
	if !allowed {
		return false, fmt.Errorf("invalid transition: %s %s -> %s", id, from, to)
	}
	ps.Status = to
	if update != nil {
		update(ps)
	}
	s.Version++
	return true, nil
}

// derivePlanStatus is edda's derivation from phase states.
func derivePlanStatus(phases []PhaseState) string {
	for _, p := range phases {
		if p.Status == phaseRunning || p.Status == phaseChecking {
			return planRunning
		}
	}
	for _, p := range phases {
		if p.Status == phaseFailed || p.Status == phaseStale {
			return planBlocked
		}
	}
	done := true
	for _, p := range phases {
		done = done && (p.Status == phasePassed || p.Status == phaseSkipped)
	}
	if done {
		return planCompleted
	}
	return planPending
}

// updatePlanStatus re-derives the status but keeps explicit terminal ones.
func (s *PlanState) updatePlanStatus() {
	if s.PlanStatus == planAborted || s.PlanStatus == planCompleted {
		return
	}
	s.PlanStatus = derivePlanStatus(s.Phases)
}

func stateDir(cwd, plan string) string {
	return filepath.Join(cwd, ".edda", "conductor", plan)
}

func statePath(cwd, plan string) string {
	return filepath.Join(stateDir(cwd, plan), "state.json")
}

// loadState returns (nil, nil) when the plan has no state file.
func loadState(cwd, plan string) (*PlanState, error) {
	path := statePath(cwd, plan)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state: %s: %w", path, err)
	}
	var st PlanState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("parsing state: %s: %w", path, err)
	}
	for i := range st.Phases {
		if st.Phases[i].Checks == nil {
			st.Phases[i].Checks = []CheckResult{}
		}
	}
	return &st, nil
}

// writeAtomic writes via a temp file in the same directory and a rename,
// so a concurrent reader sees either the old or the new file, never half.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("creating temp file for %s: %w", path, err)
	}
	tmp := f.Name()
	// CreateTemp makes 0600 files; the state is meant to be read by other tools.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("renaming %s to %s: %w", tmp, path, err)
	}
	return nil
}

func marshalState(st *PlanState) ([]byte, error) {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding state: %w", err)
	}
	return data, nil
}

func saveStateFile(cwd string, st *PlanState) error {
	data, err := marshalState(st)
	if err != nil {
		return err
	}
	if err := writeAtomic(statePath(cwd, st.PlanName), data); err != nil {
		return fmt.Errorf("saving state: %w", err)
	}
	return nil
}

// withStateLock serialises read-modify-write of state.json between the run
// process and the CLI verbs, so an abort is never lost to a racing save.
func withStateLock(cwd, plan string, fn func() error) error {
	dir := stateDir(cwd, plan)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	unlock, err := lockFile(filepath.Join(dir, "state.lock"))
	if err != nil {
		return fmt.Errorf("locking state of %q: %w", plan, err)
	}
	defer unlock()
	return fn()
}

// runnerStatus is runner-status.json, edda's light status file for pollers.
type runnerStatus struct {
	Plan         string   `json:"plan"`
	Status       string   `json:"status"`
	CurrentPhase *string  `json:"current_phase"`
	Completed    []string `json:"completed"`
	Failed       []string `json:"failed"`
	UpdatedAt    string   `json:"updated_at"`
}

func writeRunnerStatus(cwd string, st *PlanState, current string) {
	rs := runnerStatus{Plan: st.PlanName, Status: st.PlanStatus, Completed: []string{}, Failed: []string{}, UpdatedAt: nowRFC3339()}
	if current != "" {
		rs.CurrentPhase = &current
	}
	for _, p := range st.Phases {
		switch p.Status {
		case phasePassed:
			rs.Completed = append(rs.Completed, p.ID)
		case phaseFailed, phaseStale:
			rs.Failed = append(rs.Failed, p.ID)
		}
	}
	data, err := json.MarshalIndent(rs, "", "  ")
	if err == nil {
		err = writeAtomic(filepath.Join(stateDir(cwd, st.PlanName), "runner-status.json"), data)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "eddasim: runner-status.json not written: %v\n", err)
	}
}
