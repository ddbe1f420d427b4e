package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"karvi-edda-temporal/stalls"
)

// Defaults for fields a dispatch plan leaves out: karvi's dispatch builder
// defaults timeoutSec to 300, and 3 attempts is edda's own default for
// max_attempts (docs/contract.md §2).
const (
	DefaultTimeoutSec  = 300
	DefaultMaxAttempts = 3

	// MaxTimeoutSec bounds timeoutSec: a week is far beyond any real phase and
	// keeps a typo (milliseconds sent as seconds) from parking a workflow for
	// years.
	MaxTimeoutSec = 7 * 24 * 60 * 60
	// MaxMessageBytes bounds the message: it becomes plan.purpose and a
	// phase prompt, and the plan travels through workflow history.
	MaxMessageBytes = 256 * 1024
	// MinReviewAttempts and MaxReviewAttempts bound
	// controlsSnapshot.max_review_attempts, which becomes edda's max_attempts.
	MinReviewAttempts = 1
	MaxReviewAttempts = 20
)

// Dispatch modes karvi sends.
const (
	ModeDispatch   = "dispatch"
	ModeRedispatch = "redispatch"
)

var (
	taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	planIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	skillPattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
)

// Artifact is one upstream task's output as karvi gathers it
// (gatherUpstreamArtifacts). Only ID, Title and Summary reach the plan.
type Artifact struct {
	ID        string          `json:"id"`
	Title     string          `json:"title,omitempty"`
	Status    string          `json:"status,omitempty"`
	Summary   string          `json:"summary,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	OutputRef string          `json:"output_ref,omitempty"`
}

// Controls is karvi's controlsSnapshot. Pointers tell "absent" from zero so
// defaults apply only where karvi said nothing.
type Controls struct {
	QualityThreshold  *float64 `json:"quality_threshold,omitempty"`
	AutoDispatch      *bool    `json:"auto_dispatch,omitempty"`
	AutoReview        *bool    `json:"auto_review,omitempty"`
	AutoRedispatch    *bool    `json:"auto_redispatch,omitempty"`
	MaxReviewAttempts *int     `json:"max_review_attempts,omitempty"`
}

// DispatchPlan is karvi's dispatch instruction, with every field karvi's
// dispatch builder writes; docs/contract.md §2 says which are mapped and
// how each is checked. JSON names are karvi's.
type DispatchPlan struct {
	Kind             string          `json:"kind,omitempty"`
	Version          int             `json:"version,omitempty"`
	PlanID           string          `json:"planId,omitempty"`
	TaskID           string          `json:"taskId"`
	Mode             string          `json:"mode,omitempty"`
	RuntimeHint      string          `json:"runtimeHint,omitempty"`
	AgentID          string          `json:"agentId,omitempty"`
	ModelHint        *string         `json:"modelHint,omitempty"`
	TimeoutSec       *int            `json:"timeoutSec,omitempty"`
	Message          string          `json:"message"`
	Artifacts        []Artifact      `json:"artifacts,omitempty"`
	RequiredSkills   []string        `json:"requiredSkills,omitempty"`
	CodexRole        string          `json:"codexRole,omitempty"`
	ControlsSnapshot *Controls       `json:"controlsSnapshot,omitempty"`
	Skill            string          `json:"skill,omitempty"`
	UserID           string          `json:"userId,omitempty"`
	SessionID        string          `json:"sessionId,omitempty"`
	CreatedAt        string          `json:"createdAt,omitempty"`
	UpstreamTaskIDs  []string        `json:"upstreamTaskIds,omitempty"`
	InjectedLessons  json.RawMessage `json:"injectedLessons,omitempty"`
	RuntimeSelection json.RawMessage `json:"runtimeSelection,omitempty"`
	Steps            json.RawMessage `json:"steps,omitempty"`
	WorkingDir       string          `json:"workingDir,omitempty"`
	// StallAfterSec and OnStall are this runtime's own: a phase with no
	// event and no agent transcript line for StallAfterSec seconds has
	// stalled, and OnStall (warn, redispatch or abort; default warn) says
	// what follows. Absent: the worker's -stall-after and -on-stall.
	StallAfterSec *int   `json:"stallAfterSec,omitempty"`
	OnStall       string `json:"onStall,omitempty"`
}

// FieldError names the dispatch-plan field that is wrong, so karvi's operator
// can fix the task rather than read a decoder trace.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "dispatch plan: " + e.Problem
	}
	return "dispatch plan: " + e.Field + ": " + e.Problem
}

// ParseDispatchPlan decodes karvi's JSON and validates it. Unknown fields are
// accepted (karvi adds fields over time); a field of the wrong JSON type is a
// *FieldError naming it.
func ParseDispatchPlan(data []byte) (DispatchPlan, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return DispatchPlan{}, &FieldError{Problem: "empty input, want a JSON object"}
	}
	if !json.Valid(trimmed) {
		var probe any
		err := json.Unmarshal(trimmed, &probe)
		return DispatchPlan{}, &FieldError{Problem: "not valid JSON: " + strings.TrimPrefix(errString(err), "json: ")}
	}
	if trimmed[0] != '{' {
		return DispatchPlan{}, &FieldError{Problem: "must be a JSON object, got " + jsonKind(trimmed)}
	}
	var d DispatchPlan
	if err := json.Unmarshal(trimmed, &d); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return DispatchPlan{}, typeError(te)
		}
		return DispatchPlan{}, &FieldError{Problem: "cannot decode: " + err.Error()}
	}
	d.InjectedLessons = nullToNil(d.InjectedLessons)
	d.RuntimeSelection = nullToNil(d.RuntimeSelection)
	d.Steps = nullToNil(d.Steps)
	for i := range d.Artifacts {
		d.Artifacts[i].Payload = nullToNil(d.Artifacts[i].Payload)
	}
	if err := d.Validate(); err != nil {
		return DispatchPlan{}, err
	}
	return d, nil
}

// Validate checks the rules the rest of the pipeline relies on: taskId becomes
// a plan name and a URL path segment, message becomes the prompt, the numbers
// become edda limits. It returns a *FieldError.
func (d DispatchPlan) Validate() error {
	if d.TaskID == "" {
		return &FieldError{Field: "taskId", Problem: "required"}
	}
	if !taskIDPattern.MatchString(d.TaskID) {
		return &FieldError{Field: "taskId", Problem: fmt.Sprintf("%q must be 1-64 characters of A-Z a-z 0-9 _ -", d.TaskID)}
	}
	if d.PlanID != "" && !planIDPattern.MatchString(d.PlanID) {
		return &FieldError{Field: "planId", Problem: fmt.Sprintf("%q must be 1-128 characters of A-Z a-z 0-9 _ . : -", d.PlanID)}
	}
	switch d.Mode {
	case "", ModeDispatch, ModeRedispatch:
	default:
		return &FieldError{Field: "mode", Problem: fmt.Sprintf("%q must be %q or %q", d.Mode, ModeDispatch, ModeRedispatch)}
	}
	if strings.TrimSpace(d.Message) == "" {
		return &FieldError{Field: "message", Problem: "required (non-empty text)"}
	}
	if len(d.Message) > MaxMessageBytes {
		return &FieldError{Field: "message", Problem: fmt.Sprintf("%d bytes, at most %d allowed", len(d.Message), MaxMessageBytes)}
	}
	if d.TimeoutSec != nil {
		if *d.TimeoutSec < 0 {
			return &FieldError{Field: "timeoutSec", Problem: fmt.Sprintf("%d must not be negative", *d.TimeoutSec)}
		}
		if *d.TimeoutSec > MaxTimeoutSec {
			return &FieldError{Field: "timeoutSec", Problem: fmt.Sprintf("%d exceeds the maximum of %d (7 days)", *d.TimeoutSec, MaxTimeoutSec)}
		}
	}
	if d.StallAfterSec != nil {
		n, timeout := *d.StallAfterSec, d.EffectiveTimeoutSec()
		if n < 1 {
			return &FieldError{Field: "stallAfterSec", Problem: fmt.Sprintf("%d must be at least 1 (leave it out for the worker's threshold)", n)}
		}
		if n >= timeout {
			return &FieldError{Field: "stallAfterSec", Problem: fmt.Sprintf("%d must be shorter than the timeout (timeoutSec %d): a phase silent that long times out first", n, timeout)}
		}
	}
	if _, err := stalls.ParseAction(d.OnStall); err != nil {
		return &FieldError{Field: "onStall", Problem: err.Error()}
	}
	for i, a := range d.Artifacts {
		if strings.TrimSpace(a.ID) == "" {
			return &FieldError{Field: fmt.Sprintf("artifacts[%d].id", i), Problem: "required"}
		}
	}
	if c := d.ControlsSnapshot; c != nil && c.MaxReviewAttempts != nil {
		n := *c.MaxReviewAttempts
		if n < MinReviewAttempts || n > MaxReviewAttempts {
			return &FieldError{Field: "controlsSnapshot.max_review_attempts", Problem: fmt.Sprintf("%d must be between %d and %d", n, MinReviewAttempts, MaxReviewAttempts)}
		}
	}
	if d.Skill != "" && !skillPattern.MatchString(d.Skill) {
		return &FieldError{Field: "skill", Problem: fmt.Sprintf("%q must match %s", d.Skill, skillPattern)}
	}
	for i, s := range d.RequiredSkills {
		if strings.TrimSpace(s) == "" {
			return &FieldError{Field: fmt.Sprintf("requiredSkills[%d]", i), Problem: "must not be empty"}
		}
	}
	return nil
}

// EffectiveTimeoutSec is timeoutSec with karvi's default for 0/absent.
func (d DispatchPlan) EffectiveTimeoutSec() int {
	if d.TimeoutSec == nil || *d.TimeoutSec == 0 {
		return DefaultTimeoutSec
	}
	return *d.TimeoutSec
}

// EffectiveMaxAttempts is controlsSnapshot.max_review_attempts with the
// default for absent.
func (d DispatchPlan) EffectiveMaxAttempts() int {
	if d.ControlsSnapshot == nil || d.ControlsSnapshot.MaxReviewAttempts == nil {
		return DefaultMaxAttempts
	}
	return *d.ControlsSnapshot.MaxReviewAttempts
}

// StallAfter is stallAfterSec as a duration, zero when absent.
func (d DispatchPlan) StallAfter() time.Duration {
	if d.StallAfterSec == nil {
		return 0
	}
	return time.Duration(*d.StallAfterSec) * time.Second
}

// IsRedispatch reports karvi's redispatch mode.
func (d DispatchPlan) IsRedispatch() bool { return d.Mode == ModeRedispatch }

// DecodeProblem says what is wrong with JSON that did not decode, in the
// words of the DispatchPlan's own errors: "field: must be a string, got
// number", or "not valid JSON: ..." for a syntax error.
func DecodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		fe := typeError(te)
		return fe.Field + ": " + fe.Problem
	}
	return "not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

func typeError(te *json.UnmarshalTypeError) *FieldError {
	field := te.Field
	if field == "" {
		field = "(document)"
	}
	want := expectedKind(te.Type)
	got := te.Value
	if strings.HasPrefix(got, "number ") {
		// The decoder says "number 1.5" when the number does not fit the
		// Go type: say what is wrong with it rather than only its kind.
		n := strings.TrimPrefix(got, "number ")
		switch {
		case want == "whole number" && strings.ContainsAny(n, ".eE"):
			return &FieldError{Field: field, Problem: "must be a whole number, got " + n}
		case want == "whole number" || want == "number":
			return &FieldError{Field: field, Problem: "must be " + article(want) + " " + want + " in range, got " + n}
		}
		got = "number"
	}
	if got == "bool" {
		got = "boolean"
	}
	return &FieldError{Field: field, Problem: "must be " + article(want) + " " + want + ", got " + got}
}

func expectedKind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return t.Kind().String()
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// jsonKind names the JSON kind of a valid, trimmed JSON text.
func jsonKind(b []byte) string {
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func nullToNil(r json.RawMessage) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
		return nil
	}
	return r
}

func errString(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}
