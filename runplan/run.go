package runplan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"karvi-edda-temporal/dag"
	"karvi-edda-temporal/mapping"
)

// Bounds of a run's fields.
const (
	DefaultConcurrency = 3
	// MaxConcurrency keeps a typo (3000 for 3) from starting a thousand
	// conductors at once.
	MaxConcurrency = 1000
	MinComplexity  = 1
	MaxComplexity  = 10
	// MaxSlugLen bounds a slug, derived or given, so the workflow id and
	// every plan id built from it stay short.
	MaxSlugLen = 48
)

// Models a task runs on when it names none: KARIMO assigns opus from
// complexity 5 up.
const (
	ModelSonnet        = "sonnet"
	ModelOpus          = "opus"
	opusFromComplexity = 5
)

var (
	taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	slugPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	hashTail      = regexp.MustCompile(`(^|-)[0-9a-f]{6}$`)
)

// Run is a parsed, valid run file.
type Run struct {
	Slug        string
	Title       string
	Goal        string
	Repo        string
	Spec        string
	Concurrency int
	AutoStart   bool
	// CompletionTrigger is kept as written: karvi's shape for it is not
	// interpreted here.
	CompletionTrigger json.RawMessage
	Tasks             []Task

	// idx, set by Parse, finds a task by id and holds the start order, so
	// that a run of thousands of tasks is not searched end to end at every
	// step.
	idx *runIndex
}

// runIndex is what Parse works out once about a run's tasks.
type runIndex struct {
	pos   map[string]int
	order [][]string
}

func (r *Run) index() {
	ix := &runIndex{pos: make(map[string]int, len(r.Tasks))}
	for i, t := range r.Tasks {
		ix.pos[t.ID] = i
	}
	r.idx = nil
	ix.order = r.Order()
	r.idx = ix
}

// Pos is the task's place in the run file, -1 for an unknown task.
func (r Run) Pos(id string) int {
	if r.idx != nil {
		if i, ok := r.idx.pos[id]; ok && i < len(r.Tasks) && r.Tasks[i].ID == id {
			return i
		}
	}
	for i, t := range r.Tasks {
		if t.ID == id {
			return i
		}
	}
	return -1
}

// Task is one task of a run.
type Task struct {
	ID          string
	Title       string
	Description string
	// Depends is the union of depends and blocked_by, each id once, in the
	// order first written.
	Depends     []string
	Skill       string
	RuntimeHint string
	ModelHint   string
	// Model is KARIMO's assigned model; ModelHint wins over it.
	Model string
	// Complexity is KARIMO's 1-10 rating, 0 when absent.
	Complexity int
	Spec       string
	TargetRepo string
	// Estimate and Scope are carried as written (their shape varies).
	Estimate json.RawMessage
	Scope    json.RawMessage
}

// Upstream is the outcome of a task a dependent task waited for.
type Upstream struct {
	ID      string `json:"id"`
	Title   string `json:"title,omitempty"`
	Status  string `json:"status,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// WorkflowID is the id of the workflow that carries the run.
func (r Run) WorkflowID() string { return "karvi-run-" + r.Slug }

// PlanID is the dispatch planId of one task of the run.
func (r Run) PlanID(taskID string) string { return "run-" + r.Slug + "-" + taskID }

// Task returns the task with the given id.
func (r Run) Task(id string) (Task, bool) {
	if i := r.Pos(id); i >= 0 {
		return r.Tasks[i], true
	}
	return Task{}, false
}

// Model is the model the task runs on: its modelHint, else KARIMO's model,
// else one chosen by complexity (sonnet below 5, opus from 5, sonnet when
// unrated). It is "" for an unknown task.
func (r Run) Model(taskID string) string {
	t, ok := r.Task(taskID)
	if !ok {
		return ""
	}
	return t.model()
}

func (t Task) model() string {
	switch {
	case t.ModelHint != "":
		return t.ModelHint
	case t.Model != "":
		return t.Model
	case t.Complexity >= opusFromComplexity:
		return ModelOpus
	}
	return ModelSonnet
}

// Order is the order tasks can start in: levels of tasks whose dependencies
// all lie in earlier levels, each level in file order (Parse works it out
// once: callers read it, never change it). For a run Parse
// returned it holds every task exactly once.
func (r Run) Order() [][]string {
	if r.idx != nil && r.idx.order != nil {
		return r.idx.order
	}
	placed := make(map[string]bool, len(r.Tasks))
	var levels [][]string
	for len(placed) < len(r.Tasks) {
		var level []string
		for _, t := range r.Tasks {
			if placed[t.ID] || !allPlaced(t.Depends, placed) {
				continue
			}
			level = append(level, t.ID)
		}
		if len(level) == 0 {
			break // a cycle: only a Run not from Parse can have one
		}
		for _, id := range level {
			placed[id] = true
		}
		levels = append(levels, level)
	}
	return levels
}

func allPlaced(ids []string, placed map[string]bool) bool {
	for _, id := range ids {
		if !placed[id] {
			return false
		}
	}
	return true
}

// Dispatch is the DispatchPlan for one task, as karvi's dispatch builder
// writes it: the message is the title, a blank line, the description and
// the spec; the model travels as modelHint; upstream outcomes become the
// artifacts BuildPlan puts into the first phase's context. An unknown task
// gives the zero DispatchPlan, which does not validate.
func (r Run) Dispatch(taskID string, upstream []Upstream) mapping.DispatchPlan {
	t, ok := r.Task(taskID)
	if !ok {
		return mapping.DispatchPlan{}
	}
	return r.dispatch(t, upstream)
}

func (r Run) dispatch(t Task, upstream []Upstream) mapping.DispatchPlan {
	model := t.model()
	d := mapping.DispatchPlan{
		Kind:            "task_dispatch",
		Version:         1,
		PlanID:          r.PlanID(t.ID),
		TaskID:          t.ID,
		Mode:            mapping.ModeDispatch,
		RuntimeHint:     t.RuntimeHint,
		ModelHint:       &model,
		Message:         message(t),
		Skill:           t.Skill,
		UpstreamTaskIDs: append([]string(nil), t.Depends...),
	}
	for _, u := range upstream {
		d.Artifacts = append(d.Artifacts, mapping.Artifact{ID: u.ID, Title: u.Title, Status: u.Status, Summary: u.Summary})
	}
	return d
}

func message(t Task) string {
	parts := []string{strings.TrimSpace(t.Title)}
	for _, s := range []string{t.Description, t.Spec} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n")
}

// DeriveSlug turns a run title into a slug: kebab-case ASCII, at most
// MaxSlugLen characters. When that loses anything (case, punctuation,
// non-ASCII, length) or ends like a hash, a short hash of the title is
// appended, so distinct titles keep distinct slugs, as mapping.PlanName
// does for task ids.
func DeriveSlug(title string) string {
	kebab := mapping.KebabCase(title)
	if kebab != "" && kebab == title && len(kebab) <= MaxSlugLen && !hashTail.MatchString(kebab) {
		return kebab
	}
	sum := sha256.Sum256([]byte(title))
	hash := hex.EncodeToString(sum[:])[:6]
	body := strings.TrimRight(truncate(kebab, MaxSlugLen-len(hash)-1), "-")
	if body == "" {
		return "run-" + hash
	}
	return body + "-" + hash
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// file is the run file as written: karvi's project shape plus KARIMO's task
// fields. Tasks stay raw so a type error names its task.
type file struct {
	Slug              string            `json:"slug"`
	Title             string            `json:"title"`
	Goal              string            `json:"goal"`
	Repo              string            `json:"repo"`
	Spec              string            `json:"spec"`
	Concurrency       *int              `json:"concurrency"`
	AutoStart         bool              `json:"autoStart"`
	CompletionTrigger json.RawMessage   `json:"completionTrigger"`
	Tasks             []json.RawMessage `json:"tasks"`
}

type taskFile struct {
	ID          string          `json:"id"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Depends     []string        `json:"depends"`
	BlockedBy   []string        `json:"blocked_by"`
	Skill       string          `json:"skill"`
	RuntimeHint string          `json:"runtimeHint"`
	ModelHint   string          `json:"modelHint"`
	Model       string          `json:"model"`
	Complexity  *int            `json:"complexity"`
	Estimate    json.RawMessage `json:"estimate"`
	Spec        string          `json:"spec"`
	TargetRepo  string          `json:"target_repo"`
	Scope       json.RawMessage `json:"scope"`
}

// Parse decodes a run file and validates it. Unknown fields are ignored. The
// error is an *Error listing every problem found, in file order.
func Parse(data []byte) (Run, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if !json.Valid(trimmed) {
			return Run{}, problems(Problem{Msg: "not a JSON object"})
		}
		return Run{}, problems(Problem{Msg: "must be a JSON object"})
	}
	var f file
	if err := json.Unmarshal(trimmed, &f); err != nil {
		return Run{}, problems(Problem{Msg: decodeProblem(err)})
	}
	r := Run{
		Slug:              f.Slug,
		Title:             f.Title,
		Goal:              f.Goal,
		Repo:              f.Repo,
		Spec:              f.Spec,
		Concurrency:       DefaultConcurrency,
		AutoStart:         f.AutoStart,
		CompletionTrigger: nullToNil(f.CompletionTrigger),
	}
	if f.Concurrency != nil {
		r.Concurrency = *f.Concurrency
	}
	var ps []Problem
	for i, raw := range f.Tasks {
		t, err := parseTask(raw)
		if err != nil {
			ps = append(ps, Problem{Task: taskLabel(probeID(raw), i), Msg: err.Error()})
			continue
		}
		r.Tasks = append(r.Tasks, t)
	}
	if len(ps) > 0 {
		return Run{}, problems(ps...)
	}
	if r.Slug == "" {
		r.Slug = DeriveSlug(r.Title)
	}
	if err := r.validate(len(f.Tasks)); err != nil {
		return Run{}, err
	}
	r.index()
	return r, nil
}

func parseTask(raw json.RawMessage) (Task, error) {
	if trimmed := bytes.TrimSpace(raw); len(trimmed) == 0 || trimmed[0] != '{' {
		return Task{}, errors.New("must be an object, got " + truncate(string(trimmed), 20))
	}
	var tf taskFile
	if err := json.Unmarshal(raw, &tf); err != nil {
		return Task{}, errors.New(decodeProblem(err))
	}
	t := Task{
		ID:          tf.ID,
		Title:       tf.Title,
		Description: tf.Description,
		Skill:       tf.Skill,
		RuntimeHint: tf.RuntimeHint,
		ModelHint:   tf.ModelHint,
		Model:       tf.Model,
		Spec:        tf.Spec,
		TargetRepo:  tf.TargetRepo,
		Estimate:    nullToNil(tf.Estimate),
		Scope:       nullToNil(tf.Scope),
	}
	if tf.Complexity != nil {
		t.Complexity = *tf.Complexity
		if t.Complexity < MinComplexity || t.Complexity > MaxComplexity {
			return Task{}, fmt.Errorf("complexity: %d must be between %d and %d", t.Complexity, MinComplexity, MaxComplexity)
		}
	}
	seen := map[string]bool{}
	for _, id := range append(append([]string(nil), tf.Depends...), tf.BlockedBy...) {
		if !seen[id] {
			seen[id] = true
			t.Depends = append(t.Depends, id)
		}
	}
	return t, nil
}

// probeID reads a task's id even when the rest of the task does not decode,
// so the error can name it.
func probeID(raw json.RawMessage) string {
	var p struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return ""
	}
	if s, ok := p.ID.(string); ok {
		return s
	}
	return ""
}

// validate applies the run rules; n is the number of tasks in the file.
func (r Run) validate(n int) error {
	var ps []Problem
	add := func(task, msg string) { ps = append(ps, Problem{Task: task, Msg: msg}) }
	if strings.TrimSpace(r.Title) == "" {
		add("", "title: required")
	}
	slugOK := slugPattern.MatchString(r.Slug) && len(r.Slug) <= MaxSlugLen
	if !slugOK {
		add("", fmt.Sprintf("slug: %q must be kebab-case (lowercase letters, digits, hyphens), at most %d characters", r.Slug, MaxSlugLen))
	}
	if r.Concurrency < 1 || r.Concurrency > MaxConcurrency {
		add("", fmt.Sprintf("concurrency: %d must be between 1 and %d", r.Concurrency, MaxConcurrency))
	}
	if n == 0 {
		add("", "tasks: empty, a run needs at least one task")
	}

	index := make(map[string]int, len(r.Tasks))
	for i, t := range r.Tasks {
		label := taskLabel(t.ID, i)
		switch {
		case t.ID == "":
			add(label, "id: required")
		case !taskIDPattern.MatchString(t.ID):
			add(label, fmt.Sprintf("id: %q must be 1-64 characters of A-Z a-z 0-9 _ -", t.ID))
		default:
			if _, dup := index[t.ID]; dup {
				add("", "duplicate task id: "+t.ID)
			} else {
				index[t.ID] = i
			}
		}
		if strings.TrimSpace(t.Title) == "" {
			add(label, "title: required")
		}
	}
	for i, t := range r.Tasks {
		label := taskLabel(t.ID, i)
		for _, dep := range t.Depends {
			switch _, known := index[dep]; {
			case dep == t.ID:
				add("", fmt.Sprintf("task %s depends on itself", t.ID))
			case !known:
				add("", fmt.Sprintf("task %s depends on unknown task %s", label, dep))
			}
		}
		if !slugOK || !taskIDPattern.MatchString(t.ID) || strings.TrimSpace(t.Title) == "" {
			continue // already reported; the dispatch cannot be built
		}
		// The dispatch rules (skill, message size) hold for every task now,
		// not when the run reaches it.
		var fe *mapping.FieldError
		if err := r.dispatch(t, nil).Validate(); errors.As(err, &fe) {
			add(label, fe.Field+": "+fe.Problem)
		}
	}
	if cyc := findCycle(r.Tasks, index); cyc != nil {
		add("", "circular dependency: "+strings.Join(cyc, " -> "))
	}
	if len(ps) > 0 {
		return problems(ps...)
	}
	return nil
}

// findCycle returns one dependency cycle as task ids, first task repeated at
// the end, or nil. It walks tasks in file order so the reported cycle is
// deterministic; self-dependencies and unknown ids are reported elsewhere.
func findCycle(tasks []Task, index map[string]int) []string {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return dag.Cycle(ids, func(i int) []int {
		if j, ok := index[tasks[i].ID]; !ok || j != i {
			return nil // a duplicate id, reported elsewhere
		}
		var out []int
		for _, dep := range tasks[i].Depends {
			if j, ok := index[dep]; ok && j != i {
				out = append(out, j)
			}
		}
		return out
	})
}

func taskLabel(id string, i int) string {
	if id == "" || !taskIDPattern.MatchString(id) {
		return fmt.Sprintf("tasks[%d]", i)
	}
	return id
}

// decodeProblem is mapping's wording for a decode error, with the field
// named as within its task ("depends", not "tasks.depends"): the task is
// named in front of it.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if i := strings.LastIndex(te.Field, "."); i >= 0 && strings.HasPrefix(te.Field, "tasks.") {
			c := *te
			c.Field = te.Field[i+1:]
			err = &c
		}
	}
	return mapping.DecodeProblem(err)
}

func nullToNil(r json.RawMessage) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
		return nil
	}
	return r
}
