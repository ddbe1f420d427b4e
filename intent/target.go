package intent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runplan"
)

// TargetKind is what a fire starts.
type TargetKind string

// The targets.
const (
	// TargetDispatch is one karvi task: its DispatchPlan, started as the
	// task's workflow, a new attempt on every fire.
	TargetDispatch TargetKind = "dispatch"
	// TargetRun is a run file: many dependent tasks, started as the run's
	// workflow.
	TargetRun TargetKind = "run"
)

// Target is what an intent fires: the file as given, and what was read
// from it.
type Target struct {
	Kind TargetKind `json:"kind"`
	// ID is the task id of a dispatch, the slug of a run.
	ID string `json:"id"`
	// Title is the first line of the task's message, or the run's title.
	Title string `json:"title,omitempty"`
	// Data is the DispatchPlan or the run file, as given.
	Data json.RawMessage `json:"data"`
}

// String names the target as a person reads it: "task T5", "run nightly".
func (t Target) String() string {
	if t.Kind == TargetRun {
		return "run " + t.ID
	}
	return "task " + t.ID
}

// ParseTarget reads a DispatchPlan or a run file; a JSON object with a
// "tasks" member is a run file. It applies the same checks as starting
// either by hand, so a target that could not start is refused up front.
func ParseTarget(data []byte) (Target, error) {
	data = bytes.TrimSpace(data)
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		// Let the dispatch parser word what is wrong with it.
		if _, perr := mapping.ParseDispatchPlan(data); perr != nil {
			return Target{}, fmt.Errorf("dispatch plan: %w", perr)
		}
		return Target{}, fmt.Errorf("not a JSON object: %v", err)
	}
	if _, isRun := probe["tasks"]; isRun {
		r, err := runplan.Parse(data)
		if err != nil {
			return Target{}, err // its problems already say "run"
		}
		return Target{Kind: TargetRun, ID: r.Slug, Title: r.Title, Data: json.RawMessage(data)}, nil
	}
	d, err := mapping.ParseDispatchPlan(data)
	if err != nil {
		return Target{}, fmt.Errorf("dispatch plan: %w", err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(d.Message), "\n")
	return Target{Kind: TargetDispatch, ID: d.TaskID, Title: strings.TrimSpace(first), Data: json.RawMessage(data)}, nil
}

// Validate checks a target decoded from elsewhere (a schedule's action)
// by reading its data again.
func (t Target) Validate() error {
	again, err := ParseTarget(t.Data)
	if err != nil {
		return err
	}
	if again.Kind != t.Kind || again.ID != t.ID {
		return fmt.Errorf("says %s but its data is %s", t, again)
	}
	return nil
}
