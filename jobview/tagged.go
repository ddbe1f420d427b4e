package jobview

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// RunState is where the job stands. In JSON it is a tagged object whose
// "status" names the variant and whose other members are that variant's
// fields, and only those: {"status":"executing","attempt":1,"step":"test"}.
type RunState struct {
	Status string
	// Attempt: executing, verifying, succeeded. Step: executing (the phase
	// under way). DiffPath: succeeded ("" when the attempt left no diff).
	Attempt  int
	Step     string
	DiffPath string
	// Attempts and LastError: failed.
	Attempts  int
	LastError string
}

// RunState statuses.
const (
	StatePending   = "pending"
	StatePlanning  = "planning"
	StateExecuting = "executing"
	StateVerifying = "verifying"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// The RunState variants.

// Pending is a job with no attempt yet.
func Pending() RunState { return RunState{Status: StatePending} }

// Planning is an attempt whose plan is being written or whose conductor
// has not started a phase yet.
func Planning() RunState { return RunState{Status: StatePlanning} }

// Executing is attempt n running phase step.
func Executing(n int, step string) RunState {
	return RunState{Status: StateExecuting, Attempt: n, Step: step}
}

// Verifying is attempt n running a phase's checks.
func Verifying(n int) RunState { return RunState{Status: StateVerifying, Attempt: n} }

// Succeeded is a job whose attempt n completed.
func Succeeded(n int, diffPath string) RunState {
	return RunState{Status: StateSucceeded, Attempt: n, DiffPath: diffPath}
}

// Failed is a job that ended blocked after n attempts.
func Failed(n int, lastError string) RunState {
	return RunState{Status: StateFailed, Attempts: n, LastError: lastError}
}

// Cancelled is a job aborted by a person.
func Cancelled() RunState { return RunState{Status: StateCancelled} }

// MarshalJSON writes the variant's tag and fields.
func (s RunState) MarshalJSON() ([]byte, error) {
	switch s.Status {
	case StatePending, StatePlanning, StateCancelled:
		return json.Marshal(struct {
			Status string `json:"status"`
		}{s.Status})
	case StateExecuting:
		return json.Marshal(struct {
			Status  string `json:"status"`
			Attempt int    `json:"attempt"`
			Step    string `json:"step"`
		}{s.Status, s.Attempt, s.Step})
	case StateVerifying:
		return json.Marshal(struct {
			Status  string `json:"status"`
			Attempt int    `json:"attempt"`
		}{s.Status, s.Attempt})
	case StateSucceeded:
		return json.Marshal(struct {
			Status   string `json:"status"`
			Attempt  int    `json:"attempt"`
			DiffPath string `json:"diff_path"`
		}{s.Status, s.Attempt, s.DiffPath})
	case StateFailed:
		return json.Marshal(struct {
			Status    string `json:"status"`
			Attempts  int    `json:"attempts"`
			LastError string `json:"last_error"`
		}{s.Status, s.Attempts, s.LastError})
	}
	return nil, fmt.Errorf("run state: unknown status %q", s.Status)
}

// UnmarshalJSON reads a tagged object: the status must be known and the
// variant's fields present; members of other variants are ignored.
func (s *RunState) UnmarshalJSON(data []byte) error {
	t, err := readTagged(data, "run state")
	if err != nil {
		return err
	}
	var v RunState
	v.Status = t.status
	switch t.status {
	case StatePending, StatePlanning, StateCancelled:
	case StateExecuting:
		t.field("attempt", &v.Attempt)
		t.field("step", &v.Step)
	case StateVerifying:
		t.field("attempt", &v.Attempt)
	case StateSucceeded:
		t.field("attempt", &v.Attempt)
		t.field("diff_path", &v.DiffPath)
	case StateFailed:
		t.field("attempts", &v.Attempts)
		t.field("last_error", &v.LastError)
	default:
		return fmt.Errorf("run state: unknown status %q", t.status)
	}
	if t.err != nil {
		return t.err
	}
	*s = v
	return nil
}

// AttemptResult is how an attempt ended, tagged like RunState:
// {"status":"execution_failed","step":"test","error":"..."}.
type AttemptResult struct {
	Status string
	// Verdict: verification_failed.
	Verdict *Verdict
	// Step and Error: execution_failed.
	Step  string
	Error string
}

// AttemptResult statuses.
const (
	ResultInProgress         = "in_progress"
	ResultSucceeded          = "succeeded"
	ResultVerificationFailed = "verification_failed"
	ResultExecutionFailed    = "execution_failed"
)

// MarshalJSON writes the variant's tag and fields.
func (r AttemptResult) MarshalJSON() ([]byte, error) {
	switch r.Status {
	case ResultInProgress, ResultSucceeded:
		return json.Marshal(struct {
			Status string `json:"status"`
		}{r.Status})
	case ResultVerificationFailed:
		if r.Verdict == nil {
			return nil, errors.New("attempt result: verification_failed without a verdict")
		}
		return json.Marshal(struct {
			Status  string   `json:"status"`
			Verdict *Verdict `json:"verdict"`
		}{r.Status, r.Verdict})
	case ResultExecutionFailed:
		return json.Marshal(struct {
			Status string `json:"status"`
			Step   string `json:"step"`
			Error  string `json:"error"`
		}{r.Status, r.Step, r.Error})
	}
	return nil, fmt.Errorf("attempt result: unknown status %q", r.Status)
}

// UnmarshalJSON reads a tagged object, as RunState does.
func (r *AttemptResult) UnmarshalJSON(data []byte) error {
	t, err := readTagged(data, "attempt result")
	if err != nil {
		return err
	}
	v := AttemptResult{Status: t.status}
	switch t.status {
	case ResultInProgress, ResultSucceeded:
	case ResultVerificationFailed:
		v.Verdict = &Verdict{}
		t.field("verdict", v.Verdict)
	case ResultExecutionFailed:
		t.field("step", &v.Step)
		t.field("error", &v.Error)
	default:
		return fmt.Errorf("attempt result: unknown status %q", t.status)
	}
	if t.err != nil {
		return t.err
	}
	*r = v
	return nil
}

// tagged is a decoded tagged object; field keeps the first error, so a
// variant reads as a list of its fields.
type tagged struct {
	what    string
	status  string
	members map[string]json.RawMessage
	err     error
}

func readTagged(data []byte, what string) (*tagged, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("%s: not a JSON object", what)
	}
	t := &tagged{what: what}
	if err := json.Unmarshal(data, &t.members); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	raw, ok := t.members["status"]
	if !ok {
		return nil, fmt.Errorf("%s: status: missing", what)
	}
	if err := json.Unmarshal(raw, &t.status); err != nil {
		return nil, fmt.Errorf("%s: status: must be a string", what)
	}
	return t, nil
}

func (t *tagged) field(name string, dst any) {
	if t.err != nil {
		return
	}
	raw, ok := t.members[name]
	if !ok {
		t.err = fmt.Errorf("%s %s: %s: missing", t.what, t.status, name)
		return
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		t.err = fmt.Errorf("%s %s: %s: null", t.what, t.status, name)
		return
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		t.err = fmt.Errorf("%s %s: %s: %w", t.what, t.status, name, err)
	}
}
