package intake

import (
	"errors"
	"strings"
	"unicode/utf16"

	"karvi-edda-temporal/mapping"
)

// Defaults of Config and of karvi's controls.
const (
	// DefaultRuntimeHint is the runtimeHint that routes a task here.
	DefaultRuntimeHint = "edda"
	// SummaryLimit is where karvi cuts an upstream task's summary.
	SummaryLimit = 600
)

// Karvi's control defaults, applied where the board sets none.
var (
	defaultQualityThreshold  = 70.0
	defaultAutoDispatch      = false
	defaultAutoReview        = true
	defaultAutoRedispatch    = false
	defaultMaxReviewAttempts = 3
)

// Config is how the intake recognises and dispatches its tasks.
type Config struct {
	// RuntimeHint routes a task to this runtime; "" means DefaultRuntimeHint.
	RuntimeHint string
	// TimeoutSec is the plan's timeoutSec; 0 means mapping.DefaultTimeoutSec,
	// karvi's own default for a step.
	TimeoutSec int
}

func (c Config) hint() string {
	if c.RuntimeHint == "" {
		return DefaultRuntimeHint
	}
	return c.RuntimeHint
}

func (c Config) timeout() int {
	if c.TimeoutSec == 0 {
		return mapping.DefaultTimeoutSec
	}
	return c.TimeoutSec
}

// WorkflowID is the id of the task workflow a claimed task runs in.
func WorkflowID(taskID string) string { return "karvi-task-" + taskID }

// Routed reports whether the task names this runtime in its runtimeHint.
func Routed(t Task, cfg Config) bool { return t.RuntimeHint == cfg.hint() }

// Ours reports whether a task is routed here and ready to be taken: its
// runtimeHint is the configured one and its status is dispatched. Every
// karvi dispatch path (the Dispatch button, dispatch-next, project
// autostart, auto-dispatch) takes a task only in dispatched, and karvi puts
// a task there when it may run: at creation when it has no dependencies,
// and when its dependencies are approved otherwise. A pending task still
// waits for karvi; any later status means someone already took it.
func Ours(t Task, cfg Config) bool {
	return Routed(t, cfg) && t.Status == StatusDispatched
}

// FieldError names the board task field that keeps a task from making a
// valid DispatchPlan.
type FieldError struct {
	TaskID  string
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	return "task " + e.TaskID + ": " + e.Field + ": " + e.Problem
}

// planFieldToTask maps a DispatchPlan field to the board task field the
// intake built it from, so the error points at what the user can fix.
var planFieldToTask = map[string]string{
	"taskId":                               "id",
	"planId":                               "id",
	"message":                              "title",
	"skill":                                "skill",
	"requiredSkills[0]":                    "skill",
	"controlsSnapshot.max_review_attempts": "controls.max_review_attempts",
	"timeoutSec":                           "timeoutSec (intake configuration)",
}

// BuildDispatch builds the DispatchPlan for a board task the way karvi's
// dispatch builder does: the message from title, description and spec;
// one artifact per upstream task found on the board (id, title, status,
// summary cut at SummaryLimit, payload, the last succeeded step's
// output_ref); the skill as requiredSkills; modelHint; depends as
// upstreamTaskIds; the board controls with karvi's defaults; timeoutSec
// from cfg. Karvi skips an upstream task it cannot find, and so does this.
// An error is a *FieldError naming the task field at fault.
func BuildDispatch(t Task, b Board, cfg Config) (mapping.DispatchPlan, error) {
	if t.DecodeErr != "" {
		field, problem, _ := strings.Cut(t.DecodeErr, ": ")
		return mapping.DispatchPlan{}, &FieldError{TaskID: t.ID, Field: field, Problem: problem}
	}
	if strings.TrimSpace(t.Title) == "" {
		return mapping.DispatchPlan{}, &FieldError{TaskID: t.ID, Field: "title", Problem: "required (the message starts with it)"}
	}
	timeout := cfg.timeout()
	d := mapping.DispatchPlan{
		Kind:             "task_dispatch",
		Version:          1,
		PlanID:           "intake-" + t.ID,
		TaskID:           t.ID,
		Mode:             mapping.ModeDispatch,
		RuntimeHint:      t.RuntimeHint,
		AgentID:          t.Assignee,
		TimeoutSec:       &timeout,
		Message:          message(t),
		Skill:            t.Skill,
		UserID:           owner(b),
		UpstreamTaskIDs:  append([]string(nil), t.Depends...),
		ControlsSnapshot: snapshot(b.Controls),
	}
	if t.ModelHint != "" {
		m := t.ModelHint
		d.ModelHint = &m
	}
	if t.Skill != "" {
		d.RequiredSkills = []string{t.Skill}
	}
	d.Artifacts = artifacts(t, b)
	if err := d.Validate(); err != nil {
		var fe *mapping.FieldError
		if errors.As(err, &fe) {
			field, ok := planFieldToTask[fe.Field]
			switch {
			case fe.Field == "message" && len(d.Message) > mapping.MaxMessageBytes:
				field = "description and spec (the message)"
			case !ok:
				field = fe.Field
			}
			return mapping.DispatchPlan{}, &FieldError{TaskID: t.ID, Field: field, Problem: fe.Problem}
		}
		return mapping.DispatchPlan{}, &FieldError{TaskID: t.ID, Field: "(plan)", Problem: err.Error()}
	}
	return d, nil
}

// message is the title, then the description and the spec, each after a
// blank line, as a run's tasks are dispatched.
func message(t Task) string {
	parts := []string{strings.TrimSpace(t.Title)}
	for _, s := range []string{t.Description, t.Spec} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n")
}

// owner is the board's first human participant, karvi's userId.
func owner(b Board) string {
	for _, p := range b.Participants {
		if p.Type == "human" && p.ID != "" {
			return p.ID
		}
	}
	return "default"
}

func snapshot(c Controls) *mapping.Controls {
	s := &mapping.Controls{
		QualityThreshold:  c.QualityThreshold,
		AutoDispatch:      c.AutoDispatch,
		AutoReview:        c.AutoReview,
		AutoRedispatch:    c.AutoRedispatch,
		MaxReviewAttempts: c.MaxReviewAttempts,
	}
	if s.QualityThreshold == nil {
		v := defaultQualityThreshold
		s.QualityThreshold = &v
	}
	if s.AutoDispatch == nil {
		v := defaultAutoDispatch
		s.AutoDispatch = &v
	}
	if s.AutoReview == nil {
		v := defaultAutoReview
		s.AutoReview = &v
	}
	if s.AutoRedispatch == nil {
		v := defaultAutoRedispatch
		s.AutoRedispatch = &v
	}
	if s.MaxReviewAttempts == nil {
		v := defaultMaxReviewAttempts
		s.MaxReviewAttempts = &v
	}
	return s
}

func artifacts(t Task, b Board) []mapping.Artifact {
	var out []mapping.Artifact
	for _, id := range t.Depends {
		dep, ok := b.Task(id)
		if !ok || dep.DecodeErr != "" {
			continue
		}
		a := mapping.Artifact{ID: dep.ID, Title: dep.Title, Status: dep.Status}
		switch {
		case dep.LastReply != "":
			a.Summary = cut(dep.LastReply, SummaryLimit)
		case dep.Result != nil && dep.Result.Summary != "":
			a.Summary = cut(dep.Result.Summary, SummaryLimit)
		}
		if dep.Result != nil {
			a.Payload = dep.Result.Payload
		}
		for i := len(dep.Steps) - 1; i >= 0; i-- {
			if dep.Steps[i].State == "succeeded" {
				a.OutputRef = dep.Steps[i].OutputRef
				break
			}
		}
		out = append(out, a)
	}
	return out
}

// cut keeps the first n UTF-16 code units of s, as JavaScript's slice
// counts, without splitting a character: a pair cut in half is dropped.
func cut(s string, n int) string {
	units := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if w < 1 {
			w = 1
		}
		if units+w > n {
			return s[:i]
		}
		units += w
	}
	return s
}
